#include "kernels/backend_catalog.h"

namespace moetune {
namespace {

#define MOETUNE_TILE_ENTRY(n, k) Tile{n, k},

std::vector<BackendInfo> MakeCatalog() {
  return {
      {"cpu_reference",
       BackendKind::kCpu,
       "the float32 CPU reference itself (the correctness oracle)",
       {},
       true},
      {"cpu_blocked",
       BackendKind::kCpu,
       "CPU MoE with NVFP4 decoded per tile and reused across the batch",
       {MOETUNE_CPU_BLOCKED_TILES(MOETUNE_TILE_ENTRY)},
       true},
      {"dequant_cublas",
       BackendKind::kCudaSm90,
       "dequantize routed experts to BF16, then cuBLAS",
       {},
       false,
       /*graph_capturable=*/false},
      {"fused_gemv",
       BackendKind::kCudaSm90,
       "expert-batched fused NVFP4 dequant-GEMV",
       {MOETUNE_FUSED_GEMV_TILES(MOETUNE_TILE_ENTRY)},
       false},
      {"fused_gemv_fp8",
       BackendKind::kCudaSm90,
       "fused_gemv for one token on FP8 tensor cores: weights decoded to "
       "E4M3, activations split into hi + lo E4M3",
       {MOETUNE_FUSED_GEMV_FP8_TILES(MOETUNE_TILE_ENTRY)},
       false,
       /*graph_capturable=*/true,
       /*max_batch=*/1,
       /*whole_k_steps=*/true},
      {"grouped_mma",
       BackendKind::kCudaSm90,
       "token-permuted grouped GEMM on tensor cores",
       {MOETUNE_GROUPED_MMA_TILES(MOETUNE_TILE_ENTRY)},
       false},
      {"native_fp4",
       BackendKind::kCudaSm100,
       "Blackwell FP4 tensor cores (sm_100a / sm_120a builds only)",
       {},
       false},
  };
}

#undef MOETUNE_TILE_ENTRY

}  // namespace

const std::vector<BackendInfo>& BackendCatalog() {
  static const std::vector<BackendInfo>* catalog =
      new std::vector<BackendInfo>(MakeCatalog());
  return *catalog;
}

const BackendInfo* FindBackend(std::string_view name) {
  for (const BackendInfo& info : BackendCatalog()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::string TileMisfit(const BackendInfo& backend, const Tile& tile, int hidden,
                       int inter_slice) {
  const std::string dims = "hidden " + std::to_string(hidden) +
                           ", moe_intermediate/tp " +
                           std::to_string(inter_slice);
  if (backend.tiles.empty()) {
    // Untiled GPU backends (dequant_cublas) still walk K in 64-element chunks.
    const bool gpu = backend.kind != BackendKind::kCpu;
    return gpu && (hidden % 64 != 0 || inter_slice % 64 != 0)
               ? "needs multiples of 64, got " + dims
               : "";
  }
  if (backend.kind == BackendKind::kCpu) {
    // cpu_blocked walks K in whole tiles of whole NVFP4 blocks.
    if (tile.block_k % 16 != 0 || hidden % tile.block_k != 0 ||
        inter_slice % tile.block_k != 0) {
      return "block_k " + std::to_string(tile.block_k) + " must divide " + dims;
    }
    if (hidden % tile.block_n != 0 || inter_slice % tile.block_n != 0) {
      return "block_n " + std::to_string(tile.block_n) + " must divide " + dims;
    }
    return "";
  }
  // The GPU kernels: 64-element K chunks, block_n-row units over the
  // gate_up (2 x slice rows) and down (hidden rows) outputs.
  if (hidden % 64 != 0 || inter_slice % 64 != 0) {
    return "needs multiples of 64, got " + dims;
  }
  if ((2 * inter_slice) % tile.block_n != 0 || hidden % tile.block_n != 0) {
    return "block_n " + std::to_string(tile.block_n) + " must divide " + dims;
  }
  if (backend.whole_k_steps &&
      (hidden % tile.block_k != 0 || inter_slice % tile.block_k != 0)) {
    return "block_k " + std::to_string(tile.block_k) + " must divide " + dims;
  }
  return "";
}

std::string KnownBackendNames() {
  std::string names;
  for (const BackendInfo& info : BackendCatalog()) {
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return names;
}

}  // namespace moetune
