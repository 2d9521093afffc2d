// The one list of MoE backends and their tile-shape instantiations. The tuner
// validates and expands sweep specs from it; the worker registers and probes
// the same names; the CUDA sources instantiate their templates from the
// X-macros below, so a tile the tuner may schedule is a tile that exists.
// Plain C++ (no CUDA, no abseil): included from .cu files too.
// Immutable after static initialisation; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

// X(block_n, block_k) for each kernel that takes a tile shape. block_n:
// output rows per thread block; block_k: reduction elements per step.
#define MOETUNE_CPU_BLOCKED_TILES(X) X(4, 64) X(8, 128) X(16, 256) X(32, 512)
#define MOETUNE_FUSED_GEMV_TILES(X) X(16, 256) X(16, 512) X(32, 256)
#define MOETUNE_FUSED_GEMV_FP8_TILES(X) \
  X(128, 512) X(128, 256) X(128, 128) X(256, 256)
#define MOETUNE_GROUPED_MMA_TILES(X) X(64, 64) X(128, 64) X(64, 128)

namespace moetune {

struct Tile {
  int block_n = 0;
  int block_k = 0;
  friend bool operator==(const Tile&, const Tile&) = default;
};

enum class BackendKind { kCpu, kCudaSm90, kCudaSm100 };

struct BackendInfo {
  std::string name;
  BackendKind kind;
  std::string description;
  std::vector<Tile> tiles;  // empty: the backend takes no tile shape
  // Which regions it can time: every backend times MOE_LAYER; CPU backends
  // also time the whole DECODE_STEP.
  bool supports_decode_step;
  // Whether its timed region can be captured in a CUDA graph.
  bool graph_capturable = true;
  // The largest decode batch it runs (0: no limit); larger batches are not
  // in a sweep's space for it.
  int max_batch = 0;
  // Its kernels walk K in whole block_k steps: block_k must divide hidden
  // and moe_intermediate / tp.
  bool whole_k_steps = false;
};

// Every backend the code knows, available here or not.
const std::vector<BackendInfo>& BackendCatalog();
// nullptr when `name` is not a known backend.
const BackendInfo* FindBackend(std::string_view name);
// "a, b, c": for error messages that list the allowed values.
std::string KnownBackendNames();

// Why `tile` of `backend` (Tile{} for a backend without tiles) cannot run a
// layer with this hidden size and per-rank intermediate slice
// (moe_intermediate / tp), or "" when it can: the same shape rules as the
// kernels' CanImplement, so the tuner's space holds only points that can run.
std::string TileMisfit(const BackendInfo& backend, const Tile& tile, int hidden,
                       int inter_slice);

}  // namespace moetune
