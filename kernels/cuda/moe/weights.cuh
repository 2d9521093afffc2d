// The rank's weights, generated on the device from the counter-based hash
// (kernels/model/weight_gen.h) straight into the layouts the kernels read: the
// BF16 router [experts][hidden] and, for every owned expert and the shared
// one, gate_up [2 * inter_local, hidden] and down [hidden, inter_local] in the
// tiled NVFP4 layout (tiled_nvfp4.h, or its E4M3 variant tiled_e4m3.h). A
// gate_up row tile holds 8 gate rows and the 8 up rows of the same intermediate
// indices, so SiLU(gate) * up is computed in the registers that hold both. Not
// thread-safe (the runner's lock guards the one cached set).
#pragma once

#include <cstdint>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/moe/layer.cuh"

namespace moetune::gpu {

struct WeightKey {
  int device = -1;
  uint64_t seed = 0;
  int layer = 0;
  MoeDims dims;
  MoeShard shard;
  WeightLayout layout = WeightLayout::kFp16Bits;
  bool operator==(const WeightKey& o) const;
};

struct WeightSet {
  WeightKey key;
  DeviceBuffer router;               // bf16 [experts][hidden]
  DeviceBuffer gu_codes, gu_scales;  // [num_local + shared] matrices
  DeviceBuffer d_codes, d_scales;
  MatrixView gate_up, down;
};

// Fills `set` for `problem` on the current device in `layout` (synchronous).
GpuStatus GenerateWeights(const MoeProblem& problem, int device,
                          WeightLayout layout, WeightSet* set);

}  // namespace moetune::gpu
