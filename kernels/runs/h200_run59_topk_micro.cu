// Device micro-benchmark (not part of the product): cycles of one warp's
// top-8 of 256 scores, current WarpTopK vs a sorted-heads variant, and the
// SM clock (clock64 vs globaltimer).
#include <cstdio>
#include <cstdint>
#include "kernels/cuda/topk_warp.cuh"
using namespace moetune::gpu;

__device__ __forceinline__ unsigned long long Gt() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

__device__ __forceinline__ void CS(uint32_t& a, uint32_t& b, int& ia, int& ib) {
  // descending: a >= b; ties: lower index first
  const bool sw = b > a || (b == a && ib < ia);
  const uint32_t x = sw ? b : a, y = sw ? a : b; const int ix = sw ? ib : ia, iy = sw ? ia : ib;
  a = x; b = y; ia = ix; ib = iy;
}

__global__ void K(const float* scores, const float* bias, int top_k, long long* cyc, int* out) {
  const int lane = threadIdx.x;
  float s[8]; uint32_t key[8];
  for (int i = 0; i < 8; ++i) { s[i] = scores[lane + 32 * i]; key[i] = OrderedKey(s[i] + bias[lane + 32 * i]); }
  __syncwarp();
  long long t0 = clock64();
  unsigned long long g0 = Gt();
  int sum = 0;
  for (int rep = 0; rep < 100; ++rep) {
    uint32_t taken = WarpTopK(key, s, top_k, [&](int r, int e, float v) { sum += e * (r + 1); });
    sum += taken;
    key[rep & 7] ^= (sum & 1);  // defeat hoisting
  }
  long long t1 = clock64();
  unsigned long long g1 = Gt();
  // sorted heads: each lane sorts its 8 keys (desc), then per round the max head.
  int sum2 = 0;
  for (int rep = 0; rep < 100; ++rep) {
    uint32_t k[8]; int ix[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) { k[i] = key[i]; ix[i] = lane + 32 * i; }
    // odd-even transposition sort of 8 (28 compare-swaps)
#pragma unroll
    for (int p = 0; p < 8; ++p) {
#pragma unroll
      for (int i = p & 1; i + 1 < 8; i += 2) CS(k[i], k[i + 1], ix[i], ix[i + 1]);
    }
    int head = 0;
    for (int r = 0; r < top_k; ++r) {
      uint32_t best = 0; int bi = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) if (i == head) { best = k[i]; bi = ix[i]; }
      const uint32_t top = __reduce_max_sync(~0u, best);
      const uint32_t cand = best == top ? (uint32_t)bi : ~0u;
      const uint32_t e = __reduce_min_sync(~0u, cand);
      if ((e & 31u) == (uint32_t)lane) { ++head; sum2 += e * (r + 1); }
    }
    key[rep & 7] ^= (sum2 & 1);
  }
  long long t2 = clock64();
  unsigned long long g2 = Gt();
  // L2 round trip: dependent __ldcg chain
  const int* p = out + 64;
  int idx = 0;
  long long t3 = clock64();
  for (int i = 0; i < 20; ++i) idx = __ldcg(p + idx);
  long long t4 = clock64();
  if (lane == 0) { cyc[0] = (t1 - t0) / 100; cyc[1] = (t2 - t1) / 100; cyc[2] = (long long)(g1 - g0) / 100; cyc[3] = (long long)(g2 - g1) / 100; cyc[4] = (t4 - t3) / 20; cyc[5] = (t1 - t0) * 1000 / (long long)(g1 - g0 + 1); }
  out[lane] = sum + sum2 + idx;
}

int main() {
  float h[256], hb[256];
  for (int i = 0; i < 256; ++i) { h[i] = 0.3f + 0.4f * ((i * 7919) % 256) / 256.0f; hb[i] = 0.001f * (i % 13); }
  float *ds, *db; long long* dc; int* dout;
  cudaMalloc(&ds, 1024); cudaMalloc(&db, 1024); cudaMalloc(&dc, 64); cudaMalloc(&dout, 4096);
  cudaMemset(dout, 0, 4096);
  cudaMemcpy(ds, h, 1024, cudaMemcpyHostToDevice); cudaMemcpy(db, hb, 1024, cudaMemcpyHostToDevice);
  for (int it = 0; it < 3; ++it) {
    K<<<1, 32>>>(ds, db, 8, dc, dout);
    long long c[6]; cudaMemcpy(c, dc, 48, cudaMemcpyDeviceToHost);
    printf("WarpTopK %lld cyc (%lld ns) | sorted heads %lld cyc (%lld ns) | L2 dep load %lld cyc | MHz %lld\n", c[0], c[2], c[1], c[3], c[4], c[5]);
  }
  printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
