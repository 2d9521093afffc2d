// The DSA indexer's scores on tensor cores (mla.cuh IndexerScores): the
// CUDA-core kernel spends ~100 us a layer at 32 sequences x 4096 tokens on
// its float FMAs (kernels/cuda/step/PERF.md). Here a warp takes 16 past
// tokens x 32 heads by mma.sync: the FP8 keys converted exactly to FP16,
// the queries split into two FP16 parts (q = hi + lo to ~2^-22 of q), so
// the dot products keep float inputs' accuracy. The new token's score (its
// key is this step's float, not a cached FP8 one) is summed in float, as
// the CUDA-core kernel does. Launch-only; not thread-safe.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/base/launch_policy.h"
#include "kernels/cuda/step/mla.cuh"

namespace moetune::gpu {

// Head dims the tensor-core kernel is built for (others take the CUDA-core
// kernel): whole 16-byte loads of 16 dims by each of 4 lanes a row.
bool IndexerScoresMmaFits(const IndexerScores& s);

// s with IndexerScoresMmaFits(s).
GpuStatus LaunchIndexerScoresMma(const IndexerScores& s, cudaStream_t stream,
                                 const LaunchPolicy& policy);

}  // namespace moetune::gpu
