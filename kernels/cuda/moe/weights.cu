#include <cmath>

#include "kernels/cuda/moe/tiled_e4m3.h"
#include "kernels/cuda/moe/tiled_nvfp4.h"
#include "kernels/cuda/moe/weights.cuh"
#include "kernels/model/weight_gen.h"

namespace moetune::gpu {
namespace {

struct GenArgs {
  uint8_t* codes;
  uint8_t* scales;
  int64_t code_stride, scale_stride;
  int row_tiles, chunks, groups;
  bool gate_up;
  int inter_full, inter_local, tp_offset;  // tp_offset = tp_rank * inter_local
  int k_full;                              // hash row length
  uint64_t seed;
  uint32_t layer;
  int e_base, num_local;
  WeightLayout layout;
};

// The hash row of row `m` of row tile `rt`: gate_up tiles hold gate rows
// [8rt, 8rt + 8) of the slice then the matching up rows.
__device__ int64_t HashRow(const GenArgs& a, int rt, int m) {
  if (!a.gate_up) return static_cast<int64_t>(rt) * tiled::kTileRows + m;
  const int i = rt * 8 + (m & 7);
  return (m < 8 ? 0 : a.inter_full) + a.tp_offset + i;
}

__device__ uint32_t TensorOf(const GenArgs& a, int slot) {
  if (slot < a.num_local) {
    return a.gate_up ? weights::ExpertGateUp(a.e_base + slot)
                     : weights::ExpertDown(a.e_base + slot);
  }
  return a.gate_up ? weights::kSharedGateUp : weights::kSharedDown;
}

// One thread: lane `lane`'s 16 code bytes and 2 scale bytes of chunk (rt, kc)
// of matrix `blockIdx.y`.
__global__ void GenerateTiledKernel(GenArgs a) {
  const int64_t idx =
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int lane = static_cast<int>(idx % 32);
  const int kc = static_cast<int>((idx / 32) % a.chunks);
  const int rt = static_cast<int>(idx / 32 / a.chunks);
  if (rt >= a.row_tiles) return;
  const int slot = blockIdx.y;
  const uint32_t tensor = TensorOf(a, slot);
  const int g = lane / 4, c = lane % 4;
  const int col_base = (a.gate_up ? 0 : a.tp_offset) + kc * tiled::kChunkK;
  uint32_t words[4] = {0, 0, 0, 0};
  for (int j = 0; j < 4; ++j) {
    // Four (row, even column) pairs a word; one code byte holds each pair.
    for (int r = 0; r < 4; ++r) {
      const bool e4m3 = a.layout == WeightLayout::kE4m3Bits;
      const int row_in_tile = e4m3 ? g + 8 * (r & 1) : tiled::ElementRow(g, r);
      const int col = col_base + (e4m3 ? 16 * c + 4 * j + 2 * (r >> 1)
                                       : tiled::ElementCol(c, j, r, 0));
      const int64_t row = HashRow(a, rt, row_in_tile);
      const uint8_t byte = weights::Nvfp4CodeByte(
          a.seed, a.layer, tensor, row * (a.k_full / 2) + col / 2);
      if (e4m3) {
        words[j] |= tiled_e4m3::PlaceCode(byte & 15u, r & 1, 2 * (r >> 1)) |
                    tiled_e4m3::PlaceCode(byte >> 4, r & 1, 2 * (r >> 1) + 1);
      } else {
        words[j] |= tiled::PlaceCode(byte & 15u, r, 0) |
                    tiled::PlaceCode(byte >> 4, r, 1);
      }
    }
  }
  uint8_t* codes = a.codes + slot * a.code_stride +
                   tiled::CodeOffset(rt, kc, lane, a.chunks);
  *reinterpret_cast<uint4*>(codes) =
      make_uint4(words[0], words[1], words[2], words[3]);
  const int block = (col_base + 16 * c) / 16;
  uint8_t pair[2];
  for (int half = 0; half < 2; ++half) {
    const int64_t row = HashRow(a, rt, g + 8 * half);
    pair[half] = weights::Nvfp4ScaleByte(a.seed, a.layer, tensor,
                                         row * (a.k_full / 16) + block);
  }
  uint8_t* scales = a.scales + slot * a.scale_stride +
                    tiled::ScaleOffset(rt, kc, lane, a.groups);
  scales[0] = pair[0];
  scales[1] = pair[1];
}

__global__ void GenerateRouterKernel(uint16_t* w, int64_t count, uint64_t seed,
                                     uint32_t layer, float scale) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float value =
      weights::Bf16Weight(seed, layer, weights::kRouter, i, scale);
  w[i] = static_cast<uint16_t>(__float_as_uint(value) >> 16);
}

GpuStatus AllocMatrix(const Geometry& geo, bool gate_up, WeightSet* set) {
  const int rows = gate_up ? 2 * geo.inter_local : geo.hidden;
  const int k = gate_up ? geo.hidden : geo.inter_local;
  MatrixView& v = gate_up ? set->gate_up : set->down;
  v.rows = rows;
  v.k = k;
  v.chunks = tiled::ChunksOf(k);
  v.groups = tiled::GroupsOf(k);
  v.code_stride = tiled::CodeBytesOf(rows, k);
  v.scale_stride = tiled::ScaleBytesOf(rows, k);
  v.tensor_scale = weights::Nvfp4TensorScale(gate_up ? geo.hidden : geo.inter);
  const int n = geo.num_local + geo.has_shared;
  DeviceBuffer& codes = gate_up ? set->gu_codes : set->d_codes;
  DeviceBuffer& scales = gate_up ? set->gu_scales : set->d_scales;
  MG_RETURN_IF_ERROR(codes.Allocate(static_cast<size_t>(v.code_stride) * n));
  MG_RETURN_IF_ERROR(scales.Allocate(static_cast<size_t>(v.scale_stride) * n));
  v.codes = codes.as<uint8_t>();
  v.scales = scales.as<uint8_t>();
  return OkStatus();
}

GpuStatus LaunchGenerate(const MoeProblem& p, const Geometry& geo, bool gate_up,
                         WeightLayout layout, WeightSet* set) {
  const MatrixView& v = gate_up ? set->gate_up : set->down;
  GenArgs a{};
  a.codes = gate_up ? set->gu_codes.as<uint8_t>() : set->d_codes.as<uint8_t>();
  a.scales =
      gate_up ? set->gu_scales.as<uint8_t>() : set->d_scales.as<uint8_t>();
  a.code_stride = v.code_stride;
  a.scale_stride = v.scale_stride;
  a.row_tiles = v.rows / tiled::kTileRows;
  a.chunks = v.chunks;
  a.groups = v.groups;
  a.gate_up = gate_up;
  a.inter_full = geo.inter;
  a.inter_local = geo.inter_local;
  a.tp_offset = geo.tp_rank * geo.inter_local;
  a.k_full = gate_up ? geo.hidden : geo.inter;
  a.seed = p.seed;
  a.layer = static_cast<uint32_t>(p.layer);
  a.e_base = geo.e_lo;
  a.num_local = geo.num_local;
  a.layout = layout;
  const int64_t threads = static_cast<int64_t>(a.row_tiles) * a.chunks * 32;
  const dim3 grid(static_cast<unsigned>((threads + 255) / 256),
                  static_cast<unsigned>(geo.num_local + geo.has_shared));
  if (grid.y == 0) return OkStatus();
  GenerateTiledKernel<<<grid, 256>>>(a);
  MG_CHECK_LAUNCH();
  return OkStatus();
}

}  // namespace

bool WeightKey::operator==(const WeightKey& o) const {
  return device == o.device && seed == o.seed && layer == o.layer &&
         dims.hidden == o.dims.hidden && dims.moe_inter == o.dims.moe_inter &&
         dims.num_experts == o.dims.num_experts &&
         dims.num_shared == o.dims.num_shared && shard.tp == o.shard.tp &&
         shard.ep == o.shard.ep && shard.rank == o.shard.rank &&
         layout == o.layout;
}

GpuStatus GenerateWeights(const MoeProblem& problem, int device,
                          WeightLayout layout, WeightSet* set) {
  const Geometry geo = MakeGeometry(problem);
  set->key = WeightKey{};  // invalid until complete
  const int64_t router_count = static_cast<int64_t>(geo.experts) * geo.hidden;
  MG_RETURN_IF_ERROR(set->router.Allocate(router_count * 2));
  const float router_scale = 1.0f / std::sqrt(static_cast<float>(geo.hidden));
  GenerateRouterKernel<<<static_cast<unsigned>((router_count + 255) / 256),
                         256>>>(
      set->router.as<uint16_t>(), router_count, problem.seed,
      static_cast<uint32_t>(problem.layer), router_scale);
  MG_CHECK_LAUNCH();
  for (const bool gate_up : {true, false}) {
    MG_RETURN_IF_ERROR(AllocMatrix(geo, gate_up, set));
    MG_RETURN_IF_ERROR(LaunchGenerate(problem, geo, gate_up, layout, set));
  }
  MG_CUDA(cudaDeviceSynchronize());
  set->key = {device,       problem.seed,  problem.layer,
              problem.dims, problem.shard, layout};
  return OkStatus();
}

}  // namespace moetune::gpu
