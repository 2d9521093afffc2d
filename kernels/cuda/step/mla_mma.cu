#include <atomic>
#include <cstdint>
#include <string>

#include "kernels/cuda/base/hopper_async.cuh"
#include "kernels/cuda/base/launch.cuh"
#include "kernels/cuda/step/mla_mma.cuh"
#include "kernels/cuda/step/mma_parts.cuh"
#include "kernels/cuda/step/reduce.cuh"
#include "kernels/cuda/step/shared_memory_limit.cuh"

namespace moetune::gpu {
namespace {

constexpr int kWarps = 8;
constexpr int kTokens = kAttentionTokens;  // 32: two m-tiles of 16
// Both products run transposed, so that the 8 heads are mma's N (8) and
// tokens or latent dims its M (16): no half-empty rows. The scores: tokens
// (2 m-tiles of 16) x heads, K (dims) split 4 ways over the warps.
constexpr int kTokenMTiles = kTokens / 16;
constexpr int kKSplits = kWarps / kTokenMTiles;  // the scores' K split
constexpr int kParts = 3;                        // BF16 parts of a float
constexpr int kRowPad = 8;  // BF16 a row: rows 16-byte aligned, and the 8
                            // rows of an ldmatrix tile in different banks

// The block's shared memory: the entries [kTokens][dim + kRowPad] BF16, the
// queries as floats [kAttentionHeads][dim], and as A fragments
// [dim / 16][kParts][32 lanes].
struct Layout {
  int dim, row, ksteps;
  __host__ __device__ explicit Layout(int d)
      : dim(d), row(d + kRowPad), ksteps(d / 16) {}
  __host__ __device__ size_t EntryBytes() const {
    return sizeof(uint16_t) * kTokens * row;
  }
  __host__ __device__ size_t QueryBytes() const {
    return sizeof(float) * kAttentionHeads * dim;
  }
  __host__ __device__ size_t FragBytes() const {
    return sizeof(uint2) * ksteps * kParts * 32;
  }
  // With the fragments made before (prebuilt) the block holds no floats.
  __host__ __device__ size_t Bytes(bool prebuilt) const {
    return EntryBytes() + FragBytes() + (prebuilt ? 0 : QueryBytes());
  }
};

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A fragments of a 16x16 BF16 tile (ldmatrix.x4: lane i gives the address
// of row i % 8 of 8x8 matrix i / 8, in a0-a3 order); transposed: the tile
// stored with its columns as rows.
__device__ __forceinline__ void LoadA(const uint16_t* row, uint32_t (&a)[4]) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
      : "r"(SharedAddress(row)));
}
__device__ __forceinline__ void LoadATransposed(const uint16_t* row,
                                                uint32_t (&a)[4]) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, "
      "[%4];\n"
      : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
      : "r"(SharedAddress(row)));
}

// Query element d of head h (the latent part, then the rope part).
__device__ __forceinline__ float QueryAt(const SparseAttention& a, int b, int h,
                                         int d) {
  return d < a.kv_lora
             ? a.q_lat[(static_cast<int64_t>(b) * a.heads + h) * a.kv_lora + d]
             : a.q[b * a.q_stride + h * a.q_head_stride + a.rope_offset + d -
                   a.kv_lora];
}

// The split's kept entries as BF16 rows (the new token's row and rows past
// the split zero: their products must be 0, not NaN) and the group's
// queries as floats: every load of a thread in flight at once (one trip to
// memory; loops of dependent loads would be this kernel's cost).
constexpr int kEntryLoads = 10;  // 16-byte entry loads a thread
constexpr int kQueryLoads = 18;  // query floats a thread

// A tile's entries are copied kThreadsARow threads a row: thread i takes
// row i / kThreadsARow and its 16-byte pieces i % kThreadsARow + kThreadsARow
// u, u = 0, 1, ...: one kept index and one row address a thread, no
// run-time division a piece (the copies' index arithmetic, done a piece at
// a time, would be a third of the split kernel's instructions at 32
// sequences).
constexpr int kThreadsARow = kWarps * 32 / kTokens;  // 8
static_assert(kWarps * 32 == kThreadsARow * kTokens, "a tile's rows");

// This thread's row of a tile and its first piece.
struct EntryPiece {
  int row, first;
};
__device__ __forceinline__ EntryPiece PieceOfThread() {
  return EntryPiece{static_cast<int>(threadIdx.x) / kThreadsARow,
                    static_cast<int>(threadIdx.x) % kThreadsARow};
}

// Sequence b's cache row of context token kept_t (callers pass 0 for a
// row that is not live, whose pieces they zero instead of loading).
__device__ __forceinline__ const uint16_t* CacheRow(const SparseAttention& a,
                                                    int b, int kept_t,
                                                    const Layout& l) {
  return a.latent + (static_cast<int64_t>(b) * a.cache_stride + kept_t) * l.dim;
}

// Every launch fits both in one pass (SparseAttentionMmaFits): a
// thread's loads are issued together, before anything waits for them.
__device__ void LoadEntries(const SparseAttention& a, int b, int tokens,
                            const int* kept_s, const Layout& l,
                            uint4 (&raw)[kEntryLoads]) {
  const EntryPiece p = PieceOfThread();
  const int vectors = l.dim / 8;
  const bool live = p.row < tokens && kept_s[p.row] < a.context;
  const uint16_t* src = CacheRow(a, b, live ? kept_s[p.row] : 0, l);
#pragma unroll
  for (int u = 0; u < kEntryLoads; ++u) {
    const int v = p.first + kThreadsARow * u;
    raw[u] = live && v < vectors ? *reinterpret_cast<const uint4*>(src + v * 8)
                                 : make_uint4(0, 0, 0, 0);
  }
}

__device__ void StoreEntries(const uint4 (&raw)[kEntryLoads], const Layout& l,
                             uint16_t* entry) {
  const EntryPiece p = PieceOfThread();
  const int vectors = l.dim / 8;
  uint16_t* dst = entry + p.row * l.row;
#pragma unroll
  for (int u = 0; u < kEntryLoads; ++u) {
    const int v = p.first + kThreadsARow * u;
    if (v < vectors) *reinterpret_cast<uint4*>(dst + v * 8) = raw[u];
  }
}

// The group's queries a warp a head (heads past hg zero): lane l loads
// dims l + 32 u, one trip to memory for all and no run-time division an
// element (the division by the dim a float would be a third of the
// one-tile kernel's stall samples at batch 1).
static_assert(kWarps == kAttentionHeads, "a warp a head");

__device__ void LoadQueries(const SparseAttention& a, int b, int h0, int hg,
                            const Layout& l, float (&x)[kQueryLoads]) {
  const int h = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int u = 0; u < kQueryLoads; ++u) {
    const int d = lane + 32 * u;
    x[u] = h < hg && d < l.dim ? QueryAt(a, b, h0 + h, d) : 0.0f;
  }
}

__device__ void StoreQueries(const float (&x)[kQueryLoads], int hg,
                             const Layout& l, float* q) {
  const int h = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (h >= hg) return;
#pragma unroll
  for (int u = 0; u < kQueryLoads; ++u) {
    const int d = lane + 32 * u;
    if (d < l.dim) q[h * l.dim + d] = x[u];
  }
}

__device__ void StageQueries(const SparseAttention& a, int b, int h0, int hg,
                             const Layout& l, float* q) {
  float x[kQueryLoads];
  LoadQueries(a, b, h0, hg, l, x);
  StoreQueries(x, hg, l, q);
}

// The queries as mma A fragments (rows = heads; heads past hg, and rows
// 8-15, zero): for k-step j and lane (g, c), dims 16j + 2c, +1 (a0) and
// 16j + 2c + 8, +9 (a2) of head g, in three BF16 parts.
__device__ void QueryFragments(const float* q, int hg, const Layout& l,
                               uint2* qf) {
  for (int i = threadIdx.x; i < l.ksteps * 32; i += blockDim.x) {
    const int j = i / 32, lane = i % 32, g = lane / 4, c = lane % 4;
    const float* x = q + g * l.dim + 16 * j + 2 * c;
    const bool live = g < hg;
    uint32_t a0[kParts], a2[kParts];
    SplitBf16(live ? x[0] : 0.0f, live ? x[1] : 0.0f, &a0[0], &a0[1], &a0[2]);
    SplitBf16(live ? x[8] : 0.0f, live ? x[9] : 0.0f, &a2[0], &a2[1], &a2[2]);
    for (int p = 0; p < kParts; ++p) {
      qf[(j * kParts + p) * 32 + lane] = make_uint2(a0[p], a2[p]);
    }
  }
}

// The group's fragments made by MlaQueryKernel, into shared memory: every
// 16-byte load of a thread in flight.
constexpr int kFragLoads = 8;
__device__ void CopyFragments(const uint2* src, const Layout& l, uint2* qf) {
  const int total = static_cast<int>(l.FragBytes() / sizeof(uint4));
  const uint4* from = reinterpret_cast<const uint4*>(src);
  uint4* to = reinterpret_cast<uint4*>(qf);
  for (int base = threadIdx.x; base < total; base += kFragLoads * blockDim.x) {
    uint4 x[kFragLoads];
#pragma unroll
    for (int u = 0; u < kFragLoads; ++u) {
      const int i = base + u * blockDim.x;
      if (i < total) x[u] = from[i];
    }
#pragma unroll
    for (int u = 0; u < kFragLoads; ++u) {
      const int i = base + u * blockDim.x;
      if (i < total) to[i] = x[u];
    }
  }
}

// Warp w's scores: tokens of m-tile w % 2 (rows) x heads (the queries'
// fragments as B: their a0 / a2 registers are B's b0 / b1) over its
// quarter of the dims, into s[w / 2][h][t]. Products of 4 k-steps at a time
// into a fresh accumulator added in float (the tensor cores' own
// accumulation over ~100 products loses more: gemv_mma.cu).
__device__ void Scores(const uint16_t* entry, const uint2* qf, const Layout& l,
                       int hg, float* s, int warp, int lane) {
  const int g = lane / 4, c = lane % 4, mt = warp % kTokenMTiles;
  const int split = warp / kTokenMTiles;
  const int per_split = (l.ksteps + kKSplits - 1) / kKSplits;
  const int j_begin = split * per_split;
  const int j_end = min(l.ksteps, j_begin + per_split);
  const uint16_t* rows =
      entry + (16 * mt + lane % 16) * l.row + 8 * (lane / 16);
  float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int j0 = j_begin; j0 < j_end; j0 += 4) {
    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int j = j0; j < j0 + 4 && j < j_end; ++j) {
      uint32_t a[4];
      LoadA(rows + 16 * j, a);
#pragma unroll
      for (int q = 0; q < kParts; ++q) {
        const uint2 f = qf[(j * kParts + q) * 32 + lane];
        MmaBf16(part, a[0], a[1], a[2], a[3], f.x, f.y);
      }
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) sum[e] += part[e];
  }
  // d0, d1: token g, heads 2c, 2c + 1; d2, d3: token g + 8.
  float* dst = s + split * kAttentionHeads * kTokens + 16 * mt + g;
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int h = 2 * c + e;
    if (h < hg) {
      dst[h * kTokens] = sum[e];
      dst[h * kTokens + 8] = sum[2 + e];
    }
  }
}

// The new token's score for head `warp` in float (made before, or from the
// staged queries), into the first K split's sums (the others zeroed).
__device__ float FreshDot(const SparseAttention& a, int b, const float* q,
                          const Layout& l, int h, int lane) {
  const float* e = a.new_entry + static_cast<int64_t>(b) * l.dim;
  float dot = 0.0f;
#pragma unroll 6
  for (int d = lane; d < l.dim; d += 32) dot += q[h * l.dim + d] * e[d];
  return WarpSum(dot);
}

__device__ void FreshScore(const SparseAttention& a, int b, int h0,
                           const float* q, const Layout& l, int hg, int fresh_t,
                           float* s, int warp, int lane) {
  if (warp >= hg) return;
  const float dot = q != nullptr ? FreshDot(a, b, q, l, warp, lane)
                                 : a.fresh_dots[b * a.heads + h0 + warp];
  if (lane == 0) {
    s[warp * kTokens + fresh_t] = dot;
    for (int k = 1; k < kKSplits; ++k) {
      s[(k * kAttentionHeads + warp) * kTokens + fresh_t] = 0.0f;
    }
  }
}

// Softmax pieces of head `warp` for one tile of tokens, online across the
// block's tiles: the K splits' sums scaled; p (the first split's rows) becomes
// e^(s - m), 0 past the tile's tokens, where m is the running max over the
// tiles so far (*m_run, *l_run: this warp's running max and sum);
// alpha_s[warp] gets e^(m_before - m), by which the values so far are
// scaled (0 on the first tile).
__device__ void OnlineSoftmax(float* s, int hg, int tokens, float scale,
                              float* m_run, float* l_run, float* alpha_s,
                              int warp, int lane) {
  if (warp >= hg) return;
  float x = 0.0f;
  for (int k = 0; k < kKSplits; ++k) {
    x += s[(k * kAttentionHeads + warp) * kTokens + lane];
  }
  x = lane < tokens ? x * scale : -INFINITY;
  const float m = fmaxf(*m_run, WarpMax(x));
  const float e = lane < tokens ? expf(x - m) : 0.0f;
  s[warp * kTokens + lane] = e;
  const float alpha = *m_run == -INFINITY ? 0.0f : expf(*m_run - m);
  *l_run = *l_run * alpha + WarpSum(e);
  *m_run = m;
  if (lane == 0) alpha_s[warp] = alpha;
}

// The values run transposed too: latent dims (m-tiles of 16) x heads, the
// probabilities as B. M-tiles a warp holds (kv_lora up to 512).
constexpr int kValueTiles = 4;

// Where a thread's accumulator element e of m-tile `mt` lies: head 2c + e % 2
// and latent dim 16 mt + g + 8 (e / 2).
__device__ __forceinline__ int ValueHead(int lane, int e) {
  return 2 * (lane % 4) + e % 2;
}
__device__ __forceinline__ int ValueDim(int mt, int lane, int e) {
  return 16 * mt + lane / 4 + 8 * (e / 2);
}

// A thread's values of m-tile `mt` into the partial rows of head 0 at
// `out`, head_stride apart (heads past hg are not the block's).
__device__ __forceinline__ void StoreValueTile(const float (&acc)[4], int mt,
                                               int hg, float* out,
                                               int64_t head_stride, int lane) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int h = ValueHead(lane, e);
    if (h < hg) out[h * head_stride + 2 + ValueDim(mt, lane, e)] = acc[e];
  }
}

// The probabilities of head g (lane (g, c)) over a tile's 32 tokens (two
// k-steps) as mma B fragments in three BF16 parts: [k-step][part][b0, b1].
__device__ __forceinline__ void ProbabilityFragments(
    const float* p, int hg, int lane, uint32_t (&bf)[2][kParts][2]) {
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
    const float* ph = p + g * kTokens + 16 * kk + 2 * c;
    const bool live = g < hg;
    uint32_t x[kParts], y[kParts];
    SplitBf16(live ? ph[0] : 0.0f, live ? ph[1] : 0.0f, &x[0], &x[1], &x[2]);
    SplitBf16(live ? ph[8] : 0.0f, live ? ph[9] : 0.0f, &y[0], &y[1], &y[2]);
#pragma unroll
    for (int q = 0; q < kParts; ++q) {
      bf[kk][q][0] = x[q];
      bf[kk][q][1] = y[q];
    }
  }
}

// What every m-tile of a warp's values takes from a tile: the entries, the
// probabilities' fragments, each head's scale of the values so far
// (alpha), and the new token's float entry and probability where it is in
// this tile (fresh_t >= 0).
struct ValueInputs {
  const uint16_t* entry;
  int row;  // Layout::row
  uint32_t bf[2][kParts][2];
  float alpha[2], p_fresh[2];
  const float* fresh;
  int fresh_t;
};

// The lane's ldmatrix.x4.trans address of k-step kk of m-tile mt: lane i
// gives token row i % 8 (+ 8 for lanes 16-31) at dim column +8 for lanes
// 8-15 and 24-31.
__device__ __forceinline__ const uint16_t* ValueRows(const ValueInputs& v,
                                                     int mt, int kk, int lane) {
  const int token = lane % 8 + 8 * (lane / 16), column = 8 * ((lane / 8) % 2);
  return v.entry + (16 * kk + token) * v.row + 16 * mt + column;
}

// The new token's float entry times its probability, after the tile's
// products (as the products' order: the same bits).
__device__ __forceinline__ void AddFresh(const ValueInputs& v, int mt, int lane,
                                         float (&acc)[4]) {
  if (v.fresh_t < 0) return;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    acc[e] += v.p_fresh[e % 2] * v.fresh[ValueDim(mt, lane, e)];
  }
}

// Every one of a warp's kValueTiles m-tiles at once: each m-tile's
// operations in ValueTile's order (the same bits), but the tiles' products
// issued side by side, four independent chains, where one m-tile at a time
// (a branch between them) leaves six dependent products in a row (in its
// SASS a NOP between each, the values 32 % of the batch-32 kernel's stall
// samples).
__device__ __forceinline__ void ValueTilesTogether(
    const ValueInputs& v, int warp, int lane, float (&acc)[kValueTiles][4]) {
  uint32_t at[kValueTiles][2][4];
#pragma unroll
  for (int i = 0; i < kValueTiles; ++i) {
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      LoadATransposed(ValueRows(v, warp + kWarps * i, kk, lane), at[i][kk]);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] *= v.alpha[e % 2];
  }
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
    for (int q = 0; q < kParts; ++q) {
#pragma unroll
      for (int i = 0; i < kValueTiles; ++i) {
        MmaBf16(acc[i], at[i][kk][0], at[i][kk][1], at[i][kk][2], at[i][kk][3],
                v.bf[kk][q][0], v.bf[kk][q][1]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kValueTiles; ++i) {
    AddFresh(v, warp + kWarps * i, lane, acc[i]);
  }
}

// Warp w's values: latent dims of m-tiles w, w + 8, ... x heads: acc (the
// tiles before, scaled by alpha_s) plus the sum over this tile's 32 tokens
// (two k-steps) of entry x p, the probabilities in three BF16 parts; then
// the new token's float entry x its p. With `out` (a block of one tile)
// each m-tile's values are stored as soon as they are summed, into the
// partial rows of head 0 at out, head_stride apart.
__device__ void AccumulateValues(const SparseAttention& a, int b,
                                 const uint16_t* entry, const float* p,
                                 const float* alpha_s, const Layout& l, int hg,
                                 int fresh_t, float (&acc)[kValueTiles][4],
                                 float* out, int64_t head_stride, int warp,
                                 int lane) {
  const int c = lane % 4;
  uint32_t bf[2][kParts][2];  // [k-step][part][b0, b1]: p of head g
  ProbabilityFragments(p, hg, lane, bf);
  const float* fresh = a.new_entry + static_cast<int64_t>(b) * l.dim;
  float alpha[2], p_fresh[2];
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int h = 2 * c + e;
    alpha[e] = h < hg ? alpha_s[h] : 0.0f;
    p_fresh[e] = fresh_t >= 0 && h < hg ? p[h * kTokens + fresh_t] : 0.0f;
  }
  // ldmatrix.x4.trans: lane i gives token row i % 8 (+ 8 for lanes 16-31)
  // at dim column +8 for lanes 8-15 and 24-31.
  const int token = lane % 8 + 8 * (lane / 16), column = 8 * ((lane / 8) % 2);
#pragma unroll
  for (int i = 0; i < kValueTiles; ++i) {
    const int mt = warp + kWarps * i;
    if (16 * mt >= a.kv_lora) break;
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] *= alpha[e % 2];
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      uint32_t at[4];
      LoadATransposed(entry + (16 * kk + token) * l.row + 16 * mt + column, at);
#pragma unroll
      for (int q = 0; q < kParts; ++q) {
        MmaBf16(acc[i], at[0], at[1], at[2], at[3], bf[kk][q][0], bf[kk][q][1]);
      }
    }
    if (fresh_t >= 0) {  // the new token in this tile: its float entry
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc[i][e] += p_fresh[e % 2] * fresh[ValueDim(mt, lane, e)];
      }
    }
    if (out != nullptr) StoreValueTile(acc[i], mt, hg, out, head_stride, lane);
  }
}

// AccumulateValues (no `out`) with a warp's m-tiles side by side where it
// has all kValueTiles: blocks of 4 and 8 tiles (116 registers against 94;
// the TP8 step at 16 and 32 sequences -0.7 and -1.0 %; blocks of 2 tiles
// are +0.6 % at 8 sequences).
__device__ void AccumulateValuesTogether(const SparseAttention& a, int b,
                                         const uint16_t* entry, const float* p,
                                         const float* alpha_s, const Layout& l,
                                         int hg, int fresh_t,
                                         float (&acc)[kValueTiles][4], int warp,
                                         int lane) {
  if (16 * (warp + kWarps * (kValueTiles - 1)) >= a.kv_lora) {
    return AccumulateValues(a, b, entry, p, alpha_s, l, hg, fresh_t, acc,
                            nullptr, 0, warp, lane);
  }
  ValueInputs v;
  v.entry = entry;
  v.row = l.row;
  ProbabilityFragments(p, hg, lane, v.bf);
  v.fresh = a.new_entry + static_cast<int64_t>(b) * l.dim;
  v.fresh_t = fresh_t;
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int h = 2 * (lane % 4) + e;
    v.alpha[e] = h < hg ? alpha_s[h] : 0.0f;
    v.p_fresh[e] = fresh_t >= 0 && h < hg ? p[h * kTokens + fresh_t] : 0.0f;
  }
  ValueTilesTogether(v, warp, lane, acc);
}

// The block's partial: each head's running max and sum ...
__device__ void StoreRunning(int hg, int tokens, float m_run, float l_run,
                             float* part_of_head0, int64_t head_stride,
                             int warp, int lane) {
  if (warp < hg && lane == 0) {
    part_of_head0[warp * head_stride] = tokens > 0 ? m_run : -INFINITY;
    part_of_head0[warp * head_stride + 1] = l_run;
  }
}

// ... and its values.
__device__ void StoreValues(const SparseAttention& a, int hg,
                            const float (&acc)[kValueTiles][4],
                            float* part_of_head0, int64_t head_stride, int warp,
                            int lane) {
#pragma unroll
  for (int i = 0; i < kValueTiles; ++i) {
    const int mt = warp + kWarps * i;
    if (16 * mt >= a.kv_lora) break;
    StoreValueTile(acc[i], mt, hg, part_of_head0, head_stride, lane);
  }
}

// The queries of (head group, sequence) as the split blocks' fragments
// and the new token's dot products: made once here instead of in each of a
// sequence's 64 split blocks (the splits' own query work leaves them at
// 43 % of the SM's issue at batch 32).
__global__ void __launch_bounds__(kWarps * 32)
    MlaQueryKernel(SparseAttention a, int hg) {
  EnterAfterPriorKernels();
  extern __shared__ float q[];  // [hg][dim]
  const Layout l(a.kv_lora + a.rope);
  const int group = blockIdx.x, b = blockIdx.y, h0 = group * hg;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  StageQueries(a, b, h0, hg, l, q);
  __syncthreads();
  const int groups = a.heads / hg;
  QueryFragments(q, hg, l,
                 a.query_frags + (static_cast<int64_t>(b) * groups + group) *
                                     l.ksteps * kParts * 32);
  if (warp < hg) {
    const float dot = FreshDot(a, b, q, l, warp, lane);
    if (lane == 0) a.fresh_dots[b * a.heads + h0 + warp] = dot;
  }
}

// Tile `t`'s entries (its `tokens` kept indices at kept_t) copied into
// `entry` by cp.async, as one commit group; rows past the tile's tokens and
// the new token's row zero (their products must be 0, not NaN).
__device__ void IssueEntries(const SparseAttention& a, int b, int tokens,
                             const int* kept_t, const Layout& l,
                             uint16_t* entry) {
  const EntryPiece p = PieceOfThread();
  const int vectors = l.dim / 8;
  uint16_t* dst = entry + p.row * l.row;
  if (p.row < tokens && kept_t[p.row] < a.context) {
    const uint16_t* src = CacheRow(a, b, kept_t[p.row], l);
    for (int v = p.first; v < vectors; v += kThreadsARow) {
      mma_detail::CpAsync16(dst + v * 8, src + v * 8);
    }
  } else {
    for (int v = p.first; v < vectors; v += kThreadsARow) {
      *reinterpret_cast<uint4*>(dst + v * 8) = make_uint4(0, 0, 0, 0);
    }
  }
  mma_detail::CpAsyncCommit();
}

// Blocks an SM of the kernel of more than one tile (its launch bounds:
// its two entry buffers, 101 KB a block at GLM-5's dims).
constexpr int kTiledBlocksPerSm = 2;

// Block (split x head group, sequence), as SparseAttentionSplitKernel, over
// T tiles of kTokens kept tokens with an online softmax: one partial a
// block. T = 1 stages through registers (every load in flight at once);
// T > 1 (prebuilt queries only) copies tile i + 1's entries by cp.async
// into a second buffer while tile i is scored and summed. prebuilt: the
// fragments and new-token dots come from MlaQueryKernel (T = 1: 73
// registers and 65 KB, three blocks an SM, two when the block makes them).
template <int T>
__global__ void __launch_bounds__(kWarps * 32, T == 1 ? 3 : kTiledBlocksPerSm)
    SparseAttentionSplitMmaKernel(SparseAttention a, int hg, bool prebuilt) {
  EnterAfterPriorKernels();
  extern __shared__ uint4 shared4[];
  __shared__ int kept_s[T * kTokens];
  __shared__ float s[kKSplits * kAttentionHeads * kTokens];
  __shared__ float alpha_s[kAttentionHeads];
  __shared__ int fresh_s;
  const Layout l(a.kv_lora + a.rope);
  uint8_t* smem = reinterpret_cast<uint8_t*>(shared4);
  const size_t entry_bytes = l.EntryBytes() * (T > 1 ? 2 : 1);
  uint16_t* const entry0 = reinterpret_cast<uint16_t*>(smem);
  uint16_t* const entry1 =
      reinterpret_cast<uint16_t*>(smem + (T > 1 ? l.EntryBytes() : 0));
  uint2* qf = reinterpret_cast<uint2*>(smem + entry_bytes);
  float* q = prebuilt
                 ? nullptr
                 : reinterpret_cast<float*>(smem + entry_bytes + l.FragBytes());
  const int groups = a.heads / hg, b = blockIdx.y, group = blockIdx.x % groups;
  const int split = blockIdx.x / groups, h0 = group * hg;
  const int splits = gridDim.x / groups;
  const int first = split * T * kTokens;
  const int all = max(0, min(T * kTokens, a.kept_n[b] - first));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int t = threadIdx.x; t < T * kTokens; t += blockDim.x) {
    kept_s[t] = t < all ? a.kept[static_cast<int64_t>(b) * a.k + first + t] : 0;
  }
  if (threadIdx.x == 0) fresh_s = -1;
  // The queries' loads ride with the kept indices', and their fragments are
  // made while the entries' loads are in flight: one trip to memory after
  // the kept indices, not three.
  if (!prebuilt) StageQueries(a, b, h0, hg, l, q);
  __syncthreads();
  for (int t = threadIdx.x; t < all; t += blockDim.x) {
    if (kept_s[t] == a.context) fresh_s = t;
  }
  if constexpr (T == 1) {
    uint4 raw[kEntryLoads];
    LoadEntries(a, b, all, kept_s, l, raw);
    if (!prebuilt) QueryFragments(q, hg, l, qf);
    StoreEntries(raw, l, entry0);
  } else {
    if (all > 0) IssueEntries(a, b, min(kTokens, all), kept_s, l, entry0);
  }
  if (prebuilt) {
    CopyFragments(a.query_frags + (static_cast<int64_t>(b) * groups + group) *
                                      l.ksteps * kParts * 32,
                  l, qf);
  }
  const int64_t head_stride = static_cast<int64_t>(splits) * (a.kv_lora + 2);
  const auto part = [&] {
    return a.partial +
           ((static_cast<int64_t>(b) * a.heads + h0) * splits + split) *
               (a.kv_lora + 2);
  };
  float m_run = -INFINITY, l_run = 0.0f;
  float acc_run[kValueTiles][4] = {};  // T > 1: the values across tiles
  // One tile always runs its one pass (with no tokens it stores zeros);
  // more tiles run those that hold tokens.
  const int tiles = T == 1 ? 1 : (all + kTokens - 1) / kTokens;
  for (int tile = 0; tile < tiles; ++tile) {
    const int tokens = max(0, min(kTokens, all - tile * kTokens));
    const uint16_t* entry = tile % 2 == 0 ? entry0 : entry1;
    if constexpr (T > 1) {
      if (tile + 1 < tiles) {
        const int next = (tile + 1) * kTokens;
        IssueEntries(a, b, min(kTokens, all - next), kept_s + next, l,
                     tile % 2 == 0 ? entry1 : entry0);
        mma_detail::CpAsyncWait<1>();
      } else {
        mma_detail::CpAsyncWait<0>();
      }
    }
    __syncthreads();  // the tile's entries (and the fragments) are in
    Scores(entry, qf, l, hg, s, warp, lane);
    __syncthreads();
    const int fresh_t = fresh_s - tile * kTokens;
    const bool fresh_here = fresh_t >= 0 && fresh_t < kTokens;
    if (fresh_here) {  // block-uniform: the barrier only where it wrote
      FreshScore(a, b, h0, q, l, hg, fresh_t, s, warp, lane);
      __syncthreads();
    }
    OnlineSoftmax(s, hg, tokens, a.scale, &m_run, &l_run, alpha_s, warp, lane);
    __syncthreads();
    const int fresh_in_tile = fresh_here ? fresh_t : -1;
    if constexpr (T == 1) {
      // One tile: each m-tile's values stored as soon as they are summed.
      float acc[kValueTiles][4] = {};
      AccumulateValues(a, b, entry, s, alpha_s, l, hg, fresh_in_tile, acc,
                       part(), head_stride, warp, lane);
    } else if constexpr (T >= 4) {
      AccumulateValuesTogether(a, b, entry, s, alpha_s, l, hg, fresh_in_tile,
                               acc_run, warp, lane);
      __syncthreads();  // s and the entry buffer are taken next
    } else {
      AccumulateValues(a, b, entry, s, alpha_s, l, hg, fresh_in_tile, acc_run,
                       nullptr, head_stride, warp, lane);
      __syncthreads();  // s and the entry buffer are taken next
    }
  }
  StoreRunning(hg, all, m_run, l_run, part(), head_stride, warp, lane);
  // A block of one tile stored its values as it summed them.
  if constexpr (T > 1) {
    StoreValues(a, hg, acc_run, part(), head_stride, warp, lane);
  }
}

// Whether the queries' fragments are made once before the split blocks
// (MlaQueryKernel). Counted in sequences of kAttentionHeads heads (a TP8
// rank's): a data-parallel rank's 64 heads make 8 of them a sequence. From
// one where the step makes them beside the indexer (the one-tile split
// kernel then copies them instead of staging and splitting its queries;
// kernels/cuda/step/PERF.md).
bool PrebuiltQueries(const SparseAttention& a) {
  const int from = a.queries_beside ? 1 : kPrebuiltQueriesFromBatch;
  return a.query_frags != nullptr && a.fresh_dots != nullptr &&
         int64_t{a.batch} * a.heads >= int64_t{from} * kAttentionHeads;
}

template <int T>
GpuStatus LaunchSplits(const SparseAttention& a, int hg, bool prebuilt,
                       dim3 grid, cudaStream_t stream,
                       const LaunchPolicy& policy) {
  const Layout l(a.kv_lora + a.rope);
  const size_t smem = l.Bytes(prebuilt) + (T > 1 ? l.EntryBytes() : 0);
  static std::atomic<size_t> allowed{48 * 1024};
  MG_RETURN_IF_ERROR(
      AllowSharedMemory(SparseAttentionSplitMmaKernel<T>, smem, &allowed));
  return LaunchOverlapped(SparseAttentionSplitMmaKernel<T>, grid, kWarps * 32,
                          smem, stream, policy, a, hg, prebuilt);
}

}  // namespace

bool SparseAttentionMmaFits(const SparseAttention& a) {
  const int dim = a.kv_lora + a.rope;
  // Entries and queries staged in one pass of a thread's loads.
  const bool one_pass =
      dim / 8 <= kEntryLoads * kThreadsARow && dim <= kQueryLoads * 32;
  // A thread's values in registers: kValueTiles m-tiles a warp.
  const bool values_held = a.kv_lora / 16 <= kValueTiles * kWarps;
  return a.latent_fp8 == nullptr && dim % 16 == 0 && a.kv_lora % 32 == 0 &&
         kAttentionTokens == kTokens && one_pass && values_held;
}

int SparseAttentionMmaTiles(const SparseAttention& a, int hg, int sm_count) {
  if (!PrebuiltQueries(a)) return 1;
  const int64_t rows = int64_t{a.heads / hg} * a.batch;
  const int splits = SparseAttentionSplits(a.k);
  for (int t : {8, 4, 2}) {
    if ((splits + t - 1) / t * rows * 16 >= kTiledBlocksPerSm * sm_count * 15) {
      return t;
    }
  }
  return 1;
}

GpuStatus LaunchMlaQueries(const SparseAttention& a, int hg,
                           cudaStream_t stream, const LaunchPolicy& policy) {
  if (!PrebuiltQueries(a)) return OkStatus();
  const Layout l(a.kv_lora + a.rope);
  return LaunchOverlapped(MlaQueryKernel, dim3(a.heads / hg, a.batch),
                          kWarps * 32, l.QueryBytes(), stream, policy, a, hg);
}

GpuStatus LaunchSparseAttentionSplitMma(const SparseAttention& a, int hg,
                                        int tiles, dim3 grid,
                                        cudaStream_t stream,
                                        const LaunchPolicy& policy) {
  const bool prebuilt = PrebuiltQueries(a);
  if (tiles > 1 && !prebuilt) {
    return Fail(RunStatus::kCannotImplement,
                "sparse attention takes more than one tile a block only "
                "with the queries made before");
  }
  // The split's kernel is the first launched here unless the queries' is.
  LaunchPolicy split = policy;
  if (prebuilt && !a.queries_beside) {
    MG_RETURN_IF_ERROR(LaunchMlaQueries(a, hg, stream, policy));
    split = policy.Then();
  }
  switch (tiles) {
    case 1:
      return LaunchSplits<1>(a, hg, prebuilt, grid, stream, split);
    case 2:
      return LaunchSplits<2>(a, hg, prebuilt, grid, stream, split);
    case 4:
      return LaunchSplits<4>(a, hg, prebuilt, grid, stream, split);
    case 8:
      return LaunchSplits<8>(a, hg, prebuilt, grid, stream, split);
  }
  return Fail(RunStatus::kCannotImplement,
              "sparse attention takes 1, 2, 4 or 8 tiles a block, got " +
                  std::to_string(tiles));
}

}  // namespace moetune::gpu
