// The router of many tokens (router_parts.cuh, router.cu picks it): three
// wide kernels.
#include "kernels/cuda/moe/router_parts.cuh"

namespace moetune::gpu {
namespace {

// Many tokens (router.cu kManyTokens): the one-kernel router reads every
// token's input once an expert block and picks every token's top-k in one
// block (95 us at batch 128, 368 us at 512 on the H200; the MoE layer's
// kernels/cuda/moe/PERF.md). Here three wide kernels: the logits on tensor
// cores, the top-k a warp a token over many blocks, then the slot tables in
// one block.
constexpr int kLogitWarps = 8;  // a tile's K split eight ways
constexpr int kLogitUnroll = 4;

// A block a (16 tokens, 8 experts) tile of sigmoid(x W^T), each warp an
// eighth of K, four chunks' loads in flight at once (one warp a tile over
// the whole K waits on its loads); the side work spread
// over the grid.
__global__ void __launch_bounds__(kLogitWarps * 32)
    ManyLogitsKernel(RouterParams p) {
  __shared__ float part[kLogitWarps][32][4];
  SideWork(p, blockIdx.x, gridDim.x);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, c = lane % 4;
  const int e_tiles = p.experts / 8, t0 = (blockIdx.x / e_tiles) * 16;
  const int e0 = (blockIdx.x % e_tiles) * 8;
  const int ta = min(t0 + g, p.batch - 1), tb = min(t0 + g + 8, p.batch - 1);
  const uint16_t* xa = p.buf.x_bf16 + static_cast<int64_t>(ta) * p.hidden;
  const uint16_t* xb = p.buf.x_bf16 + static_cast<int64_t>(tb) * p.hidden;
  const uint16_t* wr = p.w + static_cast<int64_t>(e0 + g) * p.hidden;
  float d[4] = {};
  const int chunks = p.hidden / 64;
  for (int q0 = warp * kLogitUnroll; q0 < chunks;
       q0 += kLogitWarps * kLogitUnroll) {
    uint32_t a_lo[kLogitUnroll][8], a_hi[kLogitUnroll][8], b[kLogitUnroll][8];
#pragma unroll
    for (int u = 0; u < kLogitUnroll; ++u) {
      const int q = min(q0 + u, chunks - 1);
      LoadChunk(xa, q, c, a_lo[u]);
      LoadChunk(xb, q, c, a_hi[u]);
      LoadChunk(wr, q, c, b[u]);
    }
#pragma unroll
    for (int u = 0; u < kLogitUnroll; ++u) {
      if (q0 + u >= chunks) break;
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const uint32_t a[4] = {a_lo[u][2 * m], a_hi[u][2 * m],
                               a_lo[u][2 * m + 1], a_hi[u][2 * m + 1]};
        MmaBf16(d, a, b[u][2 * m], b[u][2 * m + 1]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) part[warp][lane][i] = d[i];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float sum = 0.0f;
    for (int w = 0; w < kLogitWarps; ++w) sum += part[w][lane][i];
    const int t = t0 + g + (i >= 2 ? 8 : 0);
    if (t < p.batch) {
      p.buf.logits[static_cast<int64_t>(t) * p.experts + e0 + 2 * c + i % 2] =
          1.0f / (1.0f + expf(-sum));
    }
  }
}

// Every token's top-k, a warp a token (as the one-kernel router's tail).
__global__ void __launch_bounds__(kThreads) ManyTopKKernel(RouterParams p) {
  __shared__ RouterShared sh;
  float bias[kPerLane];
  LaneBiases(p, bias);
  const int t = blockIdx.x * (kThreads / 32) + threadIdx.x / 32;
  if (t < p.batch) TopKToken(p, sh, t, bias);
}

// The slots and token lists from every token's picks; one block.
__global__ void __launch_bounds__(kThreads) ManySlotsKernel(RouterParams p) {
  __shared__ RouterShared sh;
  ZeroCounts(sh);
  for (int i = threadIdx.x; i < p.batch * p.top_k; i += kThreads) {
    const int e = p.buf.topk_idx[i];
    if (i < kSmemTopK) {
      sh.topk_e[i] = e;
      sh.topk_w[i] = p.buf.topk_w[i];
    }
    if (e >= p.e_lo && e < p.e_hi) atomicAdd(&sh.count[e], 1);
  }
  __syncthreads();
  BuildSlots(p, sh);
  FillPositions(p, sh);
}

}  // namespace

GpuStatus LaunchManyTokenRouter(const LayerArgs& args, cudaStream_t stream) {
  const RouterParams p = ParamsOf(args);
  // A block a (16 tokens, 8 experts) tile.
  const int tiles = (p.batch + 15) / 16 * (p.experts / 8);
  ManyLogitsKernel<<<tiles, kLogitWarps * 32, 0, stream>>>(p);
  MG_CHECK_LAUNCH();
  const int per_block = kThreads / 32;
  ManyTopKKernel<<<(p.batch + per_block - 1) / per_block, kThreads, 0,
                   stream>>>(p);
  MG_CHECK_LAUNCH();
  ManySlotsKernel<<<1, kThreads, 0, stream>>>(p);
  MG_CHECK_LAUNCH();
  return OkStatus();
}

}  // namespace moetune::gpu
