#include <cstdlib>
#include <string>

#include "kernels/backend_catalog.h"
#include "kernels/cuda/backends.cuh"
#include "kernels/cuda/expert_mma.cuh"

namespace moetune::gpu {
namespace {

__global__ void GatherRowsKernel(const uint16_t* src, uint16_t* dst,
                                 const int* tok_list, const int* meta,
                                 int hidden) {
  const int p = blockIdx.x;
  if (p >= meta[kMetaPositions]) return;
  const uint4* s = reinterpret_cast<const uint4*>(
      src + static_cast<int64_t>(tok_list[p]) * hidden);
  uint4* d = reinterpret_cast<uint4*>(dst + static_cast<int64_t>(p) * hidden);
  for (int i = threadIdx.x; i < hidden / 8; i += blockDim.x) d[i] = s[i];
}

__global__ void CombineKernel(const float* yp, const int* tok_pos,
                              const float* tok_w, float* y, int batch,
                              int hidden, int slots_per_token,
                              int apply_weight) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(batch) * hidden) return;
  const int t = static_cast<int>(i / hidden), r = static_cast<int>(i % hidden);
  float sum = 0.0f;
  for (int j = 0; j < slots_per_token; ++j) {
    const int p = tok_pos[static_cast<int64_t>(t) * slots_per_token + j];
    if (p < 0) continue;
    const float v = yp[static_cast<int64_t>(p) * hidden + r];
    sum += apply_weight ? tok_w[p] * v : v;
  }
  y[i] = sum;
}

}  // namespace

GpuStatus LaunchGatherRows(const LayerArgs& args, const uint16_t* src,
                           uint16_t* dst, cudaStream_t stream) {
  if (args.geo.max_positions == 0) return OkStatus();
  GatherRowsKernel<<<args.geo.max_positions, 128, 0, stream>>>(
      src, dst, args.buf.tok_list, args.buf.meta, args.geo.hidden);
  MG_CHECK_LAUNCH();
  return OkStatus();
}

GpuStatus LaunchCombine(const LayerArgs& args, const float* yp,
                        bool apply_weight, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(args.geo.batch) * args.geo.hidden;
  CombineKernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
      yp, args.buf.tok_pos, args.buf.tok_w, args.buf.y, args.geo.batch,
      args.geo.hidden, args.geo.top_k + 1, apply_weight ? 1 : 0);
  MG_CHECK_LAUNCH();
  return OkStatus();
}

GpuStatus CheckTiledDims(const LayerArgs& args, int rows_per_unit,
                         const char* backend) {
  const Geometry& g = args.geo;
  const std::string who = std::string(backend) + " tile " +
                          std::to_string(args.block_n) + "x" +
                          std::to_string(args.block_k) + ": ";
  if (g.hidden % 64 != 0 || g.inter_local % 64 != 0) {
    return Fail(
        RunStatus::kCannotImplement,
        who + "needs hidden and moe_inter / tp to be multiples of 64 (got " +
            std::to_string(g.hidden) + ", " + std::to_string(g.inter_local) +
            ")");
  }
  if ((2 * g.inter_local) % rows_per_unit != 0 ||
      g.hidden % rows_per_unit != 0) {
    return Fail(RunStatus::kCannotImplement,
                who +
                    "needs 2 * moe_inter / tp and hidden to be multiples of " +
                    std::to_string(rows_per_unit) + " rows");
  }
  return OkStatus();
}

std::string TileList(const std::string& backend) {
  const BackendInfo* info = FindBackend(backend);
  std::string out;
  if (info == nullptr) return out;
  for (const Tile& t : info->tiles) {
    if (!out.empty()) out += ", ";
    out += std::to_string(t.block_n) + "x" + std::to_string(t.block_k);
  }
  return out;
}

GpuStatus CheckTile(const LayerArgs& args, const char* backend) {
  const BackendInfo* info = FindBackend(backend);
  if (info != nullptr) {
    for (const Tile& t : info->tiles) {
      if (t.block_n == args.block_n && t.block_k == args.block_k)
        return OkStatus();
    }
  }
  return Fail(
      RunStatus::kCannotImplement,
      std::string(backend) + " has no tile " + std::to_string(args.block_n) +
          "x" + std::to_string(args.block_k) + "; tiles: " + TileList(backend));
}

bool PdlEnabled() {
  const char* v = std::getenv("MOETUNE_PDL");
  return v == nullptr || v[0] != '0';
}

const BackendOps* FindBackendOps(const std::string& name) {
  for (const BackendOps* ops : {&DequantCublasOps(), &FusedGemvOps(),
                                &FusedGemvFp8Ops(), &GroupedMmaOps()}) {
    if (name == ops->name) return ops;
  }
  return nullptr;
}

}  // namespace moetune::gpu
