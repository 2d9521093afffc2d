// dequant_cublas, the baseline a user writes first: router; copy the routing
// to the host (a synchronisation: no CUDA graph); dequantize every expert
// used this step (and the shared one) to BF16 (E2M1 * E4M3, exact; the
// tensor scale goes in as the GEMM's alpha); gather each expert's tokens;
// one cuBLAS GEMM per expert for gate_up, a SiLU * up kernel, one GEMM per
// expert for down; a fixed-order weighted sum per token.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <string>
#include <vector>

#include "kernels/backends/registry.h"
#include "kernels/cuda/base/cublas_api.h"
#include "kernels/cuda/moe/launcher.cuh"
#include "kernels/cuda/moe/router.cuh"
#include "kernels/cuda/moe/tiled_nvfp4.h"
#include "kernels/model/nvfp4_format.h"

namespace moetune::gpu {
namespace {

struct Workspace {
  __nv_bfloat16* wgu;  // [max_slots][2 * inter_local][hidden]
  __nv_bfloat16* wd;   // [max_slots][hidden][inter_local]
  __nv_bfloat16* xg;   // [max_positions][hidden]
  float* g;            // [max_positions][2 * inter_local]
  __nv_bfloat16* hb;   // [max_positions][inter_local]
  float* yd;           // [max_positions][hidden]
};

Workspace Carve(const LayerArgs& a, void* base, size_t* used) {
  const Geometry& g = a.geo;
  const size_t mat = static_cast<size_t>(2) * g.inter_local * g.hidden;
  const size_t pos = static_cast<size_t>(g.max_positions);
  Carver c(base);
  Workspace w;
  w.wgu = c.Take<__nv_bfloat16>(g.max_slots * mat);
  w.wd = c.Take<__nv_bfloat16>(g.max_slots * mat / 2);
  w.xg = c.Take<__nv_bfloat16>(pos * g.hidden);
  w.g = c.Take<float>(pos * 2 * g.inter_local);
  w.hb = c.Take<__nv_bfloat16>(pos * g.inter_local);
  w.yd = c.Take<float>(pos * g.hidden);
  if (used != nullptr) *used = c.used();
  return w;
}

// One thread: lane `lane`'s 32 weights of chunk (rt, kc) of slot blockIdx.y's
// matrix, written as BF16 to the row-major [rows][k] matrix.
__global__ void DequantKernel(MatrixView v, const int* slot_expert,
                              __nv_bfloat16* out, bool gate_up,
                              int inter_local) {
  const int64_t idx =
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int lane = static_cast<int>(idx % 32);
  const int kc = static_cast<int>((idx / 32) % v.chunks);
  const int rt = static_cast<int>(idx / 32 / v.chunks);
  if (rt >= v.rows / tiled::kTileRows) return;
  const int slot = blockIdx.y, e = slot_expert[slot];
  const uint4 cw = *reinterpret_cast<const uint4*>(
      v.codes + e * v.code_stride + tiled::CodeOffset(rt, kc, lane, v.chunks));
  const uint8_t* sp = v.scales + e * v.scale_stride +
                      tiled::ScaleOffset(rt, kc, lane, v.groups);
  const float scale[2] = {nvfp4::E4M3ToFloat(sp[0]), nvfp4::E4M3ToFloat(sp[1])};
  const uint32_t words[4] = {cw.x, cw.y, cw.z, cw.w};
  const int g = lane / 4, c = lane % 4;
  __nv_bfloat16* m = out + slot * static_cast<int64_t>(v.rows) * v.k;
  for (int j = 0; j < 4; ++j) {
    for (int r = 0; r < 4; ++r) {
      const int row_in_tile = tiled::ElementRow(g, r);
      const int row = gate_up ? (row_in_tile < 8 ? 0 : inter_local) + rt * 8 +
                                    (row_in_tile & 7)
                              : rt * tiled::kTileRows + row_in_tile;
      const int col = kc * tiled::kChunkK + tiled::ElementCol(c, j, r, 0);
      for (int h = 0; h < 2; ++h) {
        const float w =
            nvfp4::E2M1ToFloat(tiled::CodeAt(words[j], r, h)) * scale[r & 1];
        m[static_cast<int64_t>(row) * v.k + col + h] = __float2bfloat16_rn(w);
      }
    }
  }
}

__global__ void SiluMulKernel(const float* g, __nv_bfloat16* h, const int* meta,
                              int inter_local) {
  const int p = blockIdx.y;
  if (p >= meta[kMetaPositions]) return;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < inter_local;
       i += gridDim.x * blockDim.x) {
    const float gate = g[static_cast<int64_t>(p) * 2 * inter_local + i];
    const float up =
        g[static_cast<int64_t>(p) * 2 * inter_local + inter_local + i];
    h[static_cast<int64_t>(p) * inter_local + i] =
        __float2bfloat16_rn(gate / (1.0f + expf(-gate)) * up);
  }
}

GpuStatus CublasFailure(cublasStatus_t s, const char* what) {
  return Fail(RunStatus::kCudaError, std::string("cuBLAS ") +
                                         Cublas(nullptr)->status_name(s) +
                                         " from " + what);
}

#define MG_CUBLAS(expr)                                                     \
  do {                                                                      \
    const cublasStatus_t mg_s_ = (expr);                                    \
    if (mg_s_ != CUBLAS_STATUS_SUCCESS) return CublasFailure(mg_s_, #expr); \
  } while (0)

struct HostRouting {
  int slots = 0;
  std::vector<int> off, ntok;
};

GpuStatus FetchRouting(const LayerArgs& a, cudaStream_t stream,
                       HostRouting* r) {
  int meta[kMetaCount];
  r->off.resize(a.geo.max_slots);
  r->ntok.resize(a.geo.max_slots);
  MG_CUDA(cudaMemcpyAsync(meta, a.buf.meta, sizeof(meta),
                          cudaMemcpyDeviceToHost, stream));
  MG_CUDA(cudaMemcpyAsync(r->off.data(), a.buf.slot_tok_off,
                          a.geo.max_slots * sizeof(int), cudaMemcpyDeviceToHost,
                          stream));
  MG_CUDA(cudaMemcpyAsync(r->ntok.data(), a.buf.slot_ntok,
                          a.geo.max_slots * sizeof(int), cudaMemcpyDeviceToHost,
                          stream));
  MG_CUDA(cudaStreamSynchronize(stream));
  r->slots = meta[kMetaSlots];
  return OkStatus();
}

GpuStatus Dequantize(const LayerArgs& a, const Workspace& ws, int slots,
                     cudaStream_t stream) {
  if (slots == 0) return OkStatus();
  for (const bool gate_up : {true, false}) {
    const MatrixView& v = gate_up ? a.gate_up : a.down;
    const int64_t threads =
        static_cast<int64_t>(v.rows / tiled::kTileRows) * v.chunks * 32;
    const dim3 grid(static_cast<unsigned>((threads + 255) / 256),
                    static_cast<unsigned>(slots));
    DequantKernel<<<grid, 256, 0, stream>>>(v, a.buf.slot_expert,
                                            gate_up ? ws.wgu : ws.wd, gate_up,
                                            a.geo.inter_local);
    MG_CHECK_LAUNCH();
  }
  return OkStatus();
}

// out[p0 .. p0 + n)[m] = alpha * W[m][:] . in[p][:] for one slot.
GpuStatus Gemm(const LayerArgs& a, int m, int n, int k, float alpha,
               const __nv_bfloat16* w, const __nv_bfloat16* in, float* out) {
  const float beta = 0.0f;
  MG_CUBLAS(Cublas(nullptr)->gemm_ex(
      static_cast<cublasHandle_t>(a.cublas), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k,
      &alpha, w, CUDA_R_16BF, k, in, CUDA_R_16BF, k, &beta, out, CUDA_R_32F, m,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return OkStatus();
}

GpuStatus ExpertGemms(const LayerArgs& a, const Workspace& ws,
                      const HostRouting& r, cudaStream_t stream) {
  const Geometry& g = a.geo;
  const int64_t mat = static_cast<int64_t>(2) * g.inter_local * g.hidden;
  for (int s = 0; s < r.slots; ++s) {
    MG_RETURN_IF_ERROR(Gemm(
        a, 2 * g.inter_local, r.ntok[s], g.hidden, a.gate_up.tensor_scale,
        ws.wgu + s * mat, ws.xg + static_cast<int64_t>(r.off[s]) * g.hidden,
        ws.g + static_cast<int64_t>(r.off[s]) * 2 * g.inter_local));
  }
  const dim3 grid(static_cast<unsigned>((g.inter_local + 255) / 256),
                  static_cast<unsigned>(g.max_positions));
  SiluMulKernel<<<grid, 256, 0, stream>>>(ws.g, ws.hb, a.buf.meta,
                                          g.inter_local);
  MG_CHECK_LAUNCH();
  for (int s = 0; s < r.slots; ++s) {
    MG_RETURN_IF_ERROR(
        Gemm(a, g.hidden, r.ntok[s], g.inter_local, a.down.tensor_scale,
             ws.wd + s * mat / 2,
             ws.hb + static_cast<int64_t>(r.off[s]) * g.inter_local,
             ws.yd + static_cast<int64_t>(r.off[s]) * g.hidden));
  }
  return OkStatus();
}

size_t WorkspaceBytes(const LayerArgs& a) {
  size_t used = 0;
  Carve(a, nullptr, &used);
  return used;
}

GpuStatus Launch(const LayerArgs& a, void* workspace, cudaStream_t stream) {
  const Workspace ws = Carve(a, workspace, nullptr);
  MG_RETURN_IF_ERROR(LaunchRouter(a, stream));
  HostRouting routing;
  MG_RETURN_IF_ERROR(FetchRouting(a, stream, &routing));
  MG_RETURN_IF_ERROR(Dequantize(a, ws, routing.slots, stream));
  MG_RETURN_IF_ERROR(LaunchGatherRows(
      a, a.buf.x_bf16, reinterpret_cast<uint16_t*>(ws.xg), stream));
  MG_CUBLAS(Cublas(nullptr)->set_stream(static_cast<cublasHandle_t>(a.cublas),
                                        stream));
  MG_RETURN_IF_ERROR(ExpertGemms(a, ws, routing, stream));
  return LaunchCombine(a, ws.yd, true, stream);
}

}  // namespace
}  // namespace moetune::gpu

namespace moetune::backends::dequant_cublas {

const gpu::Launcher& Launcher() {
  static const gpu::Launcher launcher{&Descriptor(), &gpu::WorkspaceBytes,
                                      &gpu::Launch};
  return launcher;
}

}  // namespace moetune::backends::dequant_cublas
