// BackendDescriptor: everything the rest of moetune knows about one MoE
// backend, declared once under kernels/backends/<family>/ (beside a CPU
// backend's launcher; a GPU backend's is under kernels/cuda/experts/).
// The tuner builds its search space from it, the worker probes and runs by
// it, the GPU runtime checks shapes with it and the CLI prints it; no other
// file lists backends or restates their rules (backend_list.h is the one
// registration list). In the spirit of CUTLASS's operation manifest and
// ggml's backend registry.
//
// Plain C++20 (no CUDA, abseil or gRPC headers), so that .cu files include
// it too. Descriptors are immutable statics; everything here is thread-safe.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace moetune::backends {

// A kernel's tile shape. block_n: output rows per unit of work; block_k:
// reduction elements per step; stages: the depth of a block's shared-memory
// ring of steps, which trades blocks an SM against steps in flight (0: the
// kernel's own depth from its shared-memory budget; only ring kernels list
// others). Tile{} is "no tile" (backends without one).
struct Tile {
  int block_n = 0;
  int block_k = 0;
  int stages = 0;
  friend bool operator==(const Tile&, const Tile&) = default;
};

// "16x256", "128x256s4" with 4 stages; "-" for Tile{}. The one place a tile
// is written as text.
std::string TileText(const Tile& tile);
// TileText's inverse: "NxK" or "NxKsS" with positive numbers, and "-" or ""
// for Tile{}; false (and *tile untouched) for anything else.
bool ParseTileText(std::string_view text, Tile* tile);

// Where a backend runs.
enum class Placement { kCpu, kGpu };

// What a GPU backend needs of the device, checked by the probe.
struct GpuNeeds {
  int min_sm = 0;              // e.g. 90: sm_90 or newer
  bool arch_specific = false;  // uses min_sm's "a" features (sm_90a wgmma):
                               // that arch exactly, not its successors
  bool cublas = false;         // needs a cuBLAS handle
  // What min_sm brings that it uses, for the probe's reason ("Hopper",
  // "wgmma").
  std::string_view feature;
  // Non-empty: no kernel of it exists in this code base; why it is listed.
  std::string_view not_implemented;
};

// One rank's MoE layer as the shape rules see it.
struct LayerShape {
  int hidden = 0;       // K of gate_up, rows of down
  int inter_slice = 0;  // moe_intermediate / tp: K of down, half of gate_up
  int batch = 1;        // tokens of the decode step
};

struct BackendDescriptor {
  std::string_view name;
  Placement placement = Placement::kCpu;
  std::string_view description;
  // The tile shapes it is instantiated for, the first its default; empty
  // when it takes no tile.
  std::span<const Tile> tiles;
  // Its timed region can be captured in a CUDA graph (GPU backends).
  bool graph_capturable = false;
  // It can time the whole DECODE_STEP; otherwise MOE_LAYER only.
  bool times_decode_step = false;
  // The most tokens a step may have for it (0 or above: kMaxBatchTokens),
  // and why, for the refusal ("8 mma n-tiles; use grouped_mma").
  int max_batch = 0;
  std::string_view max_batch_why;
  GpuNeeds gpu;
  // The relative L2 error its output may have against the reference:
  // float32 CPU backends differ from it only in summation order; GPU
  // backends carry BF16 activations between stages.
  double error_bound = 1e-4;
  // Whether a run of it may host the trusted GPU path, and in which order:
  // with compute_reference set, its run also runs the trusted path
  // (kernels/cuda/moe/trusted.cuh) on that run's routing, the reference
  // moetune-kernel-bench checks every backend against. 0: it may not;
  // 1, 2, ...: tools try such backends in this order and take the first
  // that runs the batch (TrustedPathBackends in registry.h).
  int trusted_path_order = 0;
  // Its own shape rules: "" when `tile` (already one of `tiles`) runs
  // `shape`, else why, naming the dims. Null: no rules beyond CanImplement's.
  std::string (*shape_rules)(const LayerShape& shape,
                             const Tile& tile) = nullptr;
  // The tile measured fastest for a shape, where measurements say (Tile{}
  // elsewhere): what a run or sweep naming no tile takes when it can run
  // the shape. Null: the list's order alone decides.
  Tile (*measured_best)(const LayerShape& shape) = nullptr;

  bool is_gpu() const { return placement == Placement::kGpu; }
  bool HasTile(const Tile& tile) const;
  // tiles.front(), or Tile{} without tiles.
  Tile DefaultTile() const;
  // The tile of a run or sweep that names none: the measured best for
  // `shape` where there is one and it can run it; else the default, or
  // where that cannot run `shape` the first of the others that can
  // (fused_gemv_fp8's 128x512 does not divide a TP8 slice of 256; its
  // 128x256 does); the default when none can, so that the refusal names it.
  Tile TileFor(const LayerShape& shape) const;
  // "16x256, 16x512" ("" without tiles).
  std::string TileList() const;
  // "" when this backend can run `tile` on `shape`: the tile is one of its
  // own (Tile{} for a backend without tiles), the batch within max_batch,
  // and shape_rules hold. Otherwise the reason, starting with its name.
  // The tuner keeps a point in the space only when this is "", and the GPU
  // runtime refuses a run with the same words.
  std::string CanImplement(const LayerShape& shape, const Tile& tile) const;
  // "" when a device of compute capability `sm` (major * 10 + minor: 90,
  // 120) has the architecture `gpu` needs: min_sm or newer, or min_sm
  // exactly when arch_specific (sm_90a code does not run on sm_100 or
  // sm_120). Otherwise why, starting with its name: "grouped_wgmma: needs
  // sm_90a (wgmma), device is sm_120". "" for CPU backends. The worker's GPU
  // probe refuses with it before asking the GPU library.
  std::string DeviceRefusal(int sm) const;
};

}  // namespace moetune::backends
