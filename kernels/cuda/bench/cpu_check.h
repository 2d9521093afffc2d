// An independent CPU evaluation of the MoE layer formula, straight from
// kernels/model/weight_gen.h and kernels/model/nvfp4_format.h in double
// precision: it checks the trusted GPU path (at full dims, a handful of output
// elements; at small dims, all of them). Plain C++; pure functions;
// thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/moe/moe_gpu.h"

namespace moetune::gpu::cpu {

// The input as the device sees it: every element rounded to BF16.
std::vector<float> RoundedInput(const MoeProblem& problem);

struct TokenRoute {
  std::vector<int> experts;    // top_k, best first
  std::vector<float> weights;  // normalised, times routed_scaling
};
// Routing of token `t` (logits in double, scores in float as on the GPU).
TokenRoute Route(const MoeProblem& problem, const std::vector<float>& x, int t);

// Output elements y[token][row] of the rank's partial sum, for every
// (token, row) of `tokens` x `rows`, in that order; `threads` CPU threads.
std::vector<double> OutputRows(const MoeProblem& problem,
                               const std::vector<int>& tokens,
                               const std::vector<int>& rows, int threads);

}  // namespace moetune::gpu::cpu
