#include "kernels/backend_catalog.h"

namespace moetune {
namespace {

#define MOETUNE_TILE_ENTRY(n, k) Tile{n, k},

std::vector<BackendInfo> MakeCatalog() {
  return {
      {"cpu_reference", BackendKind::kCpu,
       "the float32 CPU reference itself (the correctness oracle)", {}, true},
      {"cpu_blocked", BackendKind::kCpu,
       "CPU MoE with NVFP4 decoded per tile and reused across the batch",
       {MOETUNE_CPU_BLOCKED_TILES(MOETUNE_TILE_ENTRY)}, true},
      {"dequant_cublas", BackendKind::kCudaSm90,
       "dequantize routed experts to BF16, then cuBLAS", {}, false},
      {"fused_gemv", BackendKind::kCudaSm90,
       "expert-batched fused NVFP4 dequant-GEMV",
       {MOETUNE_FUSED_GEMV_TILES(MOETUNE_TILE_ENTRY)}, false},
      {"grouped_mma", BackendKind::kCudaSm90,
       "token-permuted grouped GEMM on tensor cores",
       {MOETUNE_GROUPED_MMA_TILES(MOETUNE_TILE_ENTRY)}, false},
      {"native_fp4", BackendKind::kCudaSm100,
       "Blackwell FP4 tensor cores (sm_100a / sm_120a builds only)", {}, false},
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

std::string KnownBackendNames() {
  std::string names;
  for (const BackendInfo& info : BackendCatalog()) {
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return names;
}

}  // namespace moetune
