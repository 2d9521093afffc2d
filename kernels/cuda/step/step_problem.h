// The GPU decode step's problem for a reference step spec: the same model,
// rank, tokens, router biases and RoPE as kernels/reference computes with,
// so that the two compute the same step. Plain C++ (the worker, tests and
// the step benchmark build it with g++). Pure functions; thread-safe.
#pragma once

#include "kernels/cuda/step/step_gpu.h"
#include "kernels/model/model_config.h"
#include "kernels/reference/step_spec.h"

namespace moetune::gpu {

StepDims StepDimsOf(const model::ModelConfig& config);

// The spec's quantization map and KV cache dtype.
StepFormats StepFormatsOf(const ref::StepSpec& spec);

// The spec's dims, formats, seed, layers, batch, context and shard; its token
// ids (ref::TokenId), each MoE layer's router bias (ref::RouterBias) and RoPE
// at position `context` as ref::ApplyRope computes it.
StepProblem MakeStepProblem(const ref::StepSpec& spec);

}  // namespace moetune::gpu
