// One run's device memory (the layer's RunBuffers, the trusted path's input
// and output, the backend's workspace) and the bytes a rank must move, the
// roofline's numerator. Not thread-safe (one run at a time).
#pragma once

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/moe/launcher.cuh"
#include "kernels/cuda/moe/moe_gpu.h"

namespace moetune::gpu {

struct RunState {
  DeviceBuffer main, workspace;
  float* x_float = nullptr;  // trusted input
  float* y_ref = nullptr;    // trusted output
};

// Carves a layer's RunBuffers (all but the input and the bias, which the
// caller provides) from `c`: a null-based Carver only sizes them.
void CarveLayerBuffers(const Geometry& g, const Launcher& launcher, Carver& c,
                       RunBuffers* out);

// Allocates a->buf, the trusted buffers and the workspace, and uploads the
// input (rounded to BF16, as bits for the kernels and as floats for the
// trusted path) and the router bias.
// A MoE input [n] as the layer reads it: rounded to BF16, as bits for the
// kernels and as floats for the trusted path (synchronous copies).
GpuStatus UploadBf16Input(const float* input, size_t n, uint16_t* bits,
                          float* floats);

GpuStatus AllocRun(const MoeProblem& p, LayerArgs* a, const Launcher& launcher,
                   RunState* st);

// Bytes the rank must at least move for one layer (the CPU reference's
// MoeLayerBytes): the router, each distinct owned expert's slice once
// (`distinct` of them), the shared slice, BF16 input and output.
double MinBytes(const Geometry& g, int distinct);
// Bytes of one layer's weights kept on this rank: the router and every
// stored expert slice.
double LayerWeightBytes(const Geometry& g);

}  // namespace moetune::gpu
