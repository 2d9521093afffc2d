// Device micro-benchmark (not product code): fused_gemv_fp8's batch-1 copies
// (version 26, tile 128x512) with no compute, for the same bytes laid out
// four ways, to see what the layout of a unit's weights costs. A "layer" is
// gate_up (9 experts x [4096, 6144]: 3456 units) then down (9 x [6144, 2048]:
// 1728 units); a unit = 8 row tiles (16 rows) x 512 K = 36,864 B of E2M1
// codes + E4M3 scales, plus 4 KB of activations and 128 B of their scales
// from a small L2-resident buffer. Each of 264 blocks (2 an SM) streams a
// contiguous range of units through a 2-stage TMA ring, as the kernel does.
//   P0 tiled: per row tile, 4 KB of codes + 512 B of scales (the tiled layout)
//   P1 per warp (2 row tiles): 8 KB of codes + 1 KB of scales, contiguous
//   P2 per warp: one 9 KB copy (codes and scales together)
//   P3 per unit: one 36 KB copy
//   P4 = P0 without the activation copies
// Timed like RunMoeLayer: L2 flushed, events around; one layer, and 8 layers
// (each its own weights) in one graph, per layer.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

__device__ __forceinline__ uint32_t Smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void Init(uint64_t* b) { asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(Smem(b)) : "memory"); }
__device__ __forceinline__ void Expect(uint64_t* b, uint32_t n) { asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(Smem(b)), "r"(n) : "memory"); }
__device__ __forceinline__ void Wait(uint64_t* b, uint32_t ph) {
  asm volatile("{\n.reg .pred d;\nW_%=:\nmbarrier.try_wait.parity.shared::cta.b64 d, [%0], %1;\n@!d bra W_%=;\n}\n" ::"r"(Smem(b)), "r"(ph) : "memory"); }
__device__ __forceinline__ void Copy(void* dst, const void* src, uint32_t n, uint64_t* b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(Smem(dst)), "l"(src), "r"(n), "r"(Smem(b)) : "memory"); }

constexpr int kUnitW = 36864, kStage = kUnitW + 4096 + 128, kStages = 2;
struct Mat { int rows, k; };  // one expert's matrix
constexpr Mat kGateUp{4096, 6144}, kDown{6144, 2048};
constexpr int kExperts = 9;
__host__ __device__ constexpr size_t CodesOf(Mat m) { return (size_t)m.rows * m.k / 2; }
__host__ __device__ constexpr size_t ScalesOf(Mat m) { return (size_t)m.rows * m.k / 16; }
__host__ __device__ constexpr size_t MatBytes(Mat m) { return kExperts * (CodesOf(m) + ScalesOf(m)); }

// Copies of unit u of matrix m (base: codes of all experts, then scales).
__device__ void IssueUnit(const uint8_t* base, Mat m, int pattern, int u, const uint8_t* act, uint8_t* dst, uint64_t* bar) {
  const int steps = m.k / 512, rgs = m.rows / 128, per_expert = rgs * steps;
  const int e = u / per_expert, rg = (u % per_expert) / steps, ks = u % steps;
  const int chunks = m.k / 64, groups = chunks / 4;
  const uint8_t* codes = base + (size_t)e * CodesOf(m);
  const uint8_t* scales = base + kExperts * CodesOf(m) + (size_t)e * ScalesOf(m);
  Expect(bar, pattern == 4 ? kUnitW : kStage - 0);
  if (pattern == 0 || pattern == 4) {
    for (int t = 0; t < 8; ++t) {
      const int rt = rg * 8 + t;
      Copy(dst + t * 4096, codes + ((size_t)rt * chunks + ks * 8) * 512, 4096, bar);
      Copy(dst + 32768 + t * 512, scales + ((size_t)rt * groups + ks * 2) * 256, 512, bar);
    }
  } else {
    // The same bytes, unit by unit contiguous: unit (e, rg, ks) at its index.
    const uint8_t* unit = base + (size_t)u * kUnitW;
    if (pattern == 3) {
      Copy(dst, unit, kUnitW, bar);
    } else {
      for (int w = 0; w < 4; ++w) {
        if (pattern == 2) { Copy(dst + w * 9216, unit + w * 9216, 9216, bar); continue; }
        Copy(dst + w * 8192, unit + w * 9216, 8192, bar);
        Copy(dst + 32768 + w * 1024, unit + w * 9216 + 8192, 1024, bar);
      }
    }
  }
  if (pattern != 4) {
    Copy(dst + kUnitW, act + (size_t)ks * 4096, 4096, bar);
    Copy(dst + kUnitW + 4096, act + 65536 + (size_t)ks * 128, 128, bar);
  }
}

__global__ void StreamMat(const uint8_t* base, Mat m, int pattern, const uint8_t* act, unsigned* sink) {
  extern __shared__ __align__(128) uint8_t sm[];
  __shared__ uint64_t bar[kStages];
  if (threadIdx.x != 0) return;
  for (int s = 0; s < kStages; ++s) Init(&bar[s]);
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  const int units = kExperts * (m.rows / 128) * (m.k / 512);
  const int lo = (int)((long)units * blockIdx.x / gridDim.x), hi = (int)((long)units * (blockIdx.x + 1) / gridDim.x);
  const int n = hi - lo;
  unsigned acc = 0;
  for (int i = 0; i < n + kStages; ++i) {
    if (i >= kStages) { const int v = i - kStages; Wait(&bar[v % kStages], (v / kStages) & 1); acc += sm[(v % kStages) * kStage + 7]; }
    if (i < n) IssueUnit(base, m, pattern, lo + i, act, sm + (i % kStages) * kStage, &bar[i % kStages]);
  }
  if (acc == 12345) sink[0] = acc;
}

__global__ void Plain(const uint4* p, size_t n, unsigned* sink) {
  uint4 a = make_uint4(0, 0, 0, 0);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) { uint4 v = __ldcs(p + i); a.x ^= v.x; a.y ^= v.y; }
  if (a.x == 12345 && a.y == 7) sink[0] = a.x;
}

int main() {
  constexpr int kChain = 8, G = 264;
  const size_t layer = MatBytes(kGateUp) + MatBytes(kDown), flush_bytes = 512u << 20;
  uint8_t *w, *flush, *act; unsigned* sink;
  cudaMalloc(&w, kChain * layer); cudaMalloc(&flush, flush_bytes); cudaMalloc(&act, 1 << 20); cudaMalloc(&sink, 64);
  cudaMemset(w, 1, kChain * layer); cudaMemset(flush, 2, flush_bytes); cudaMemset(act, 3, 1 << 20);
  cudaFuncSetAttribute(StreamMat, cudaFuncAttributeMaxDynamicSharedMemorySize, kStages * kStage);
  cudaStream_t st; cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto median = [&](auto launch) {
    std::vector<float> t;
    for (int r = 0; r < 33; ++r) {
      Plain<<<132 * 4, 512, 0, st>>>((const uint4*)flush, flush_bytes / 16, sink);
      cudaEventRecord(e0, st); launch(); cudaEventRecord(e1, st); cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1); if (r >= 3) t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  printf("layer bytes (codes + scales) %zu, units 3456 + 1728 of %d B\n", layer, kUnitW);
  const char* names[5] = {"P0 tiled: 4 KB + 512 B a row tile", "P1 per warp 8 KB + 1 KB", "P2 per warp 9 KB", "P3 per unit 36 KB", "P4 tiled, no activation copies"};
  for (int pattern = 0; pattern < 5; ++pattern) {
    auto one = [&](int l) {
      const uint8_t* base = w + l * layer;
      StreamMat<<<G, 32, kStages * kStage, st>>>(base, kGateUp, pattern, act, sink);
      StreamMat<<<G, 32, kStages * kStage, st>>>(base + MatBytes(kGateUp), kDown, pattern, act, sink);
    };
    const float alone = median([&] { one(0); });
    cudaGraph_t g; cudaGraphExec_t ge;
    cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
    for (int l = 0; l < kChain; ++l) one(l);
    cudaStreamEndCapture(st, &g); cudaGraphInstantiate(&ge, g, 0);
    const float chain = median([&] { cudaGraphLaunch(ge, st); }) / kChain;
    printf("%-36s alone %6.1f us %5.2f TB/s | chain of 8 (graph) %6.1f us %5.2f TB/s a layer\n", names[pattern], alone, layer / (alone * 1e6), chain, layer / (chain * 1e6));
    cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
  }
  printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
