// The `cpu_blocked` MoE backend: the reference MoE layer's math on packed
// NVFP4 bytes, with a BN x BK tile of each weight matrix decoded once into a
// small float buffer and applied to every token routed to that expert. Tile
// shapes are template parameters instantiated from MOETUNE_CPU_BLOCKED_TILES
// only (kernels/backends/cpu/tiles.h), the list its descriptor gives the tuner.
// BlockedMoe caches materialized weights and scratch buffers: one instance
// must not be used from two threads at once; distinct instances are
// independent. Memory: one packed TP slice per (layer, expert) ever routed
// to (about 21 MB per GLM-5 expert at tp 1), so time one MoE layer at
// glm5 dims, not a whole glm5 decode step.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/reference/step_spec.h"
#include "kernels/reference/tensors.h"

namespace moetune::cpu {

// OK when the blocked kernel can run `spec` with this tile.
// INVALID_ARGUMENT: a bad problem (ValidateStepSpec fails: batch < 1, ...).
// FAILED_PRECONDITION ("kernel cannot do this shape"): the tile is not one
// of MOETUNE_CPU_BLOCKED_TILES, or block_k (a multiple of 16) does not
// divide the K dims (hidden, moe_intermediate / tp), or block_n does not
// divide the row counts (moe_intermediate / tp, hidden).
absl::Status CanImplementBlocked(const ref::StepSpec& spec, int block_n,
                                 int block_k);

// y[t][r] = sum_c W[r][c] * x[t][c] for x [tokens][w.k], y [tokens][w.rows].
using TileGemmFn = void (*)(const ref::PackedNvfp4& w, const float* x,
                            int tokens, float* y);

class BlockedMoe {
 public:
  static absl::StatusOr<std::unique_ptr<BlockedMoe>> Create(
      const ref::StepSpec& spec, int block_n, int block_k);

  // Same contract as ref::MoeLayerReference for the spec's shard: x [batch]
  // [hidden] normed input, y [batch][hidden] overwritten. The first call
  // for a layer (and for an expert first routed to) materializes its
  // packed weights; run once before timing. INVALID_ARGUMENT for a layer
  // that is not an MoE layer, batch < 1 or null pointers.
  absl::Status Run(int layer, const float* x, int batch, float* y);

 private:
  struct ExpertSlice {      // this rank's TP slice, packed
    ref::PackedNvfp4 gate;  // [slice, hidden]
    ref::PackedNvfp4 up;    // [slice, hidden]
    ref::PackedNvfp4 down;  // [hidden, slice]
  };
  struct LayerCache {
    std::vector<float> router;  // BF16 values as float, [experts][hidden]
    std::vector<float> bias;    // [experts]
    std::map<int, ExpertSlice> experts;  // by expert index
    std::unique_ptr<ExpertSlice> shared;
  };
  struct RoutedToken {
    int token;
    float weight;
  };

  BlockedMoe(const ref::StepSpec& spec, TileGemmFn gemm)
      : spec_(spec), gemm_(gemm) {}

  LayerCache& Layer(int layer);
  // Tokens of the batch by routed expert this shard owns, with weights.
  std::map<int, std::vector<RoutedToken>> Bucket(const LayerCache& cache,
                                                 const float* x,
                                                 int batch) const;
  const ExpertSlice& Expert(LayerCache& cache, int layer, int expert);
  ExpertSlice MaterializeExpert(const ref::Nvfp4TensorDesc& gate_up,
                                const ref::Nvfp4TensorDesc& down) const;
  void RunExpert(const ExpertSlice& expert, const float* x,
                 const std::vector<RoutedToken>& tokens, float* y);

  const ref::StepSpec spec_;
  const TileGemmFn gemm_;
  std::map<int, LayerCache> layers_;
  // Scratch, reused across calls: gathered input, gate, up, down output.
  std::vector<float> x_gathered_, gate_, up_, down_out_;
};

}  // namespace moetune::cpu
