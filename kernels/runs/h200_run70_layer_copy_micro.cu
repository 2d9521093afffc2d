// Device micro-benchmark (not product code): a pure copy of exactly one
// GLM-5 MoE layer's batch-1 bytes (194,273,280 B), timed the way RunMoeLayer
// times a layer: the L2 flushed by a read first, events around; alone, and as
// 8 back-to-back copies of 8 distinct regions (one graph, and plain launches),
// figures per copy. Against the floor = bytes / the bandwidth measured the
// way the probe measures it (a plain read of 2 GiB, median of 10), in this
// process: how much of the floor a layer could reach if it did nothing but
// stream its bytes.
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

constexpr size_t kLayerBytes = 194273280;
constexpr int kUnit = 32768, kStages = 3;
constexpr int kUnits = (kLayerBytes + kUnit - 1) / kUnit;  // the last one short

// Units b, b + G, b + 2G, ... of the layer through a 3-stage TMA ring.
__global__ void StreamLayer(const uint8_t* base, unsigned* sink) {
  extern __shared__ __align__(128) uint8_t sm[];
  __shared__ uint64_t bar[kStages];
  if (threadIdx.x != 0) return;
  for (int s = 0; s < kStages; ++s) Init(&bar[s]);
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  const int mine = (kUnits - blockIdx.x + gridDim.x - 1) / gridDim.x;
  unsigned acc = 0;
  for (int i = 0; i < mine + kStages; ++i) {
    if (i >= kStages) { const int u = i - kStages; Wait(&bar[u % kStages], (u / kStages) & 1); acc += sm[(u % kStages) * kUnit + 7]; }
    if (i < mine) {
      const size_t unit = blockIdx.x + (size_t)i * gridDim.x;
      const size_t left = kLayerBytes - unit * kUnit;
      const uint32_t n = left < kUnit ? (uint32_t)left : kUnit;
      Expect(&bar[i % kStages], n);
      Copy(sm + (i % kStages) * kUnit, base + unit * kUnit, n, &bar[i % kStages]);
    }
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
  const size_t flush_bytes = 512u << 20, probe_bytes = size_t{2} << 30;
  uint8_t *w, *flush, *probe; unsigned* sink;
  cudaMalloc(&w, kChain * kLayerBytes); cudaMalloc(&flush, flush_bytes);
  cudaMalloc(&probe, probe_bytes); cudaMalloc(&sink, 64);
  cudaMemset(w, 1, kChain * kLayerBytes); cudaMemset(flush, 2, flush_bytes); cudaMemset(probe, 3, probe_bytes);
  cudaFuncSetAttribute(StreamLayer, cudaFuncAttributeMaxDynamicSharedMemorySize, kStages * kUnit);
  cudaStream_t st; cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto median = [&](int reps, auto before, auto launch) {
    std::vector<float> t;
    for (int r = 0; r < reps + 3; ++r) {
      before();
      cudaEventRecord(e0, st); launch(); cudaEventRecord(e1, st); cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1); if (r >= 3) t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  auto nothing = [] {};
  auto flushL2 = [&] { Plain<<<132 * 4, 512, 0, st>>>((const uint4*)flush, flush_bytes / 16, sink); };
  const float probe_us = median(10, nothing, [&] { Plain<<<132 * 4, 512, 0, st>>>((const uint4*)probe, probe_bytes / 16, sink); });
  const double bw = probe_bytes / (probe_us * 1e3);  // GB/s
  const double floor_us = kLayerBytes / (bw * 1e3);
  printf("probe-like read of 2 GiB: %.1f us = %.0f GB/s; layer bytes %zu, floor %.1f us\n", probe_us, bw, kLayerBytes, floor_us);
  auto one = [&](int l) { StreamLayer<<<G, 32, kStages * kUnit, st>>>(w + l * kLayerBytes, sink); };
  auto report = [&](const char* name, float us_per_layer) {
    printf("%-44s %7.1f us a layer  %5.2f TB/s  %5.1f %% of the floor\n", name, us_per_layer, kLayerBytes / (us_per_layer * 1e6), 100.0 * floor_us / us_per_layer);
  };
  report("one layer's copy alone", median(30, flushL2, [&] { one(0); }));
  report("8 layers' copies, plain launches, per layer", median(30, flushL2, [&] { for (int l = 0; l < kChain; ++l) one(l); }) / kChain);
  cudaGraph_t g; cudaGraphExec_t ge;
  cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
  for (int l = 0; l < kChain; ++l) one(l);
  cudaStreamEndCapture(st, &g); cudaGraphInstantiate(&ge, g, 0);
  report("8 layers' copies, one graph, per layer", median(30, flushL2, [&] { cudaGraphLaunch(ge, st); }) / kChain);
  cudaGraph_t g1; cudaGraphExec_t ge1;
  cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal); one(0);
  cudaStreamEndCapture(st, &g1); cudaGraphInstantiate(&ge1, g1, 0);
  report("one layer's copy, its own graph", median(30, flushL2, [&] { cudaGraphLaunch(ge1, st); }));
  printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
