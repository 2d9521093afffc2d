// The plain structs one MoE layer run passes between the runner, the router
// and the backends: the rank's geometry, its generated weights and the
// device buffers of one run. No logic beyond derived sizes. Not thread-safe.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/moe_gpu.h"

namespace moetune::gpu {

// What rank `shard.rank` owns (brief: rank = ep_rank * tp + tp_rank).
struct Geometry {
  int batch = 0, hidden = 0, inter = 0, experts = 0, top_k = 0;
  float scaling = 1.0f;
  int tp_rank = 0, ep_rank = 0;
  int inter_local = 0;     // moe_inter / tp
  int e_lo = 0, e_hi = 0;  // owned routed experts [e_lo, e_hi)
  int num_local = 0;       // e_hi - e_lo
  int has_shared = 0;      // the shared expert's TP slice (ep_rank 0)
  int max_slots = 0;       // routed slots + shared, upper bound
  int max_positions = 0;   // token-slot pairs, upper bound
};
Geometry MakeGeometry(const MoeProblem& problem);

// Where each element's bits sit inside a tiled word: tiled_nvfp4.h (decoded
// to fp16) or tiled_e4m3.h (decoded to FP8 E4M3).
enum class WeightLayout { kFp16Bits, kE4m3Bits };

// One weight matrix type (gate_up or down) of every local expert, the shared
// one last (index num_local), in the tiled layout (tiled_nvfp4.h).
struct MatrixView {
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
  int64_t code_stride = 0;  // bytes per expert
  int64_t scale_stride = 0;
  int rows = 0, k = 0, chunks = 0, groups = 0;
  float tensor_scale = 0;  // weights::Nvfp4TensorScale(full K)
};

// Device pointers of one run; sizes follow Geometry's bounds.
struct RunBuffers {
  const uint16_t* x_bf16 = nullptr;  // [batch][hidden], the input
  const float* bias = nullptr;       // [experts]
  __half* x16 = nullptr;             // [batch][hidden], fp16 copy
  float* logits = nullptr;           // [batch][experts], sigmoid(logit) scores
  int* router_counter = nullptr;     // last-block ticket, self-resetting
  int* topk_idx = nullptr;           // [batch][top_k]
  float* topk_w = nullptr;           // [batch][top_k]
  int* tok_pos = nullptr;            // [batch][top_k + 1] position or -1
  int* meta = nullptr;         // slots, routed slots, positions, 64-token tiles
  int* slot_expert = nullptr;  // [max_slots] local expert index
  int* slot_tok_off = nullptr;  // [max_slots] first position
  int* slot_ntok = nullptr;     // [max_slots]
  int* tile_prefix = nullptr;   // [max_slots + 1]
  int* tok_list = nullptr;      // [max_positions] token id
  float* tok_w = nullptr;       // [max_positions] routing weight
  float* gu_partial = nullptr;  // [max_positions][2 * inter_local]
  int* gu_counters = nullptr;   // [max_slots][inter_local / 8]
  __half* h = nullptr;          // [max_positions][inter_local]
  float* y = nullptr;           // [batch][hidden], the output
  // fused_gemv_fp8's activations (act_fp8.cuh): the input's and h's blocks
  // of 16 as hi + lo E4M3 bytes in wgmma B layout (8 bytes a value, mostly
  // zeros) and their inverse scales.
  uint8_t* x_fp8 = nullptr;    // [batch][hidden * 8]
  float* x_fp8_inv = nullptr;  // [batch][hidden / 16]
  uint8_t* h_fp8 = nullptr;    // [max_positions][inter_local * 8]
  float* h_fp8_inv = nullptr;  // [max_positions][inter_local / 16]
  // kTimelineSlots %globaltimer stamps (ns), written only by a
  // -DMOETUNE_TIMELINE build (see below).
  unsigned long long* timeline = nullptr;
};

inline constexpr int kMetaSlots = 0, kMetaRouted = 1, kMetaPositions = 2,
                     kMetaTiles = 3;
inline constexpr int kGroupedTokens = 64;  // grouped_mma's token tile

// Timeline probes of a -DMOETUNE_TIMELINE build (a measurement aid: where
// the layer's time goes between router, gate_up and down; PERF.md version
// 10). Slot i holds the earliest (TimelineIsMin) or latest stamp of: 0
// router start, 1 logits done, 2 last block found, 3 top-k done, 4 slots
// built, 5 router end, 6 gate_up start, 7 its shared expert done, 8 its
// routed part released, 9 gate_up end, 10 down start, 11 down end, and the
// spread of gate_up's warps: 12 last start, 13 last released, 14 first done
// with the shared expert. Compiled out otherwise.
inline constexpr int kTimelineSlots = 15;
// Per gate_up warp (the first kTimelineGateUpWarps): start, shared expert
// done, released into the routed part, end; after the kTimelineSlots stamps.
// Then per router block (kTimelineRouterBlocks): start, its weights landed,
// its scores written, its last-block ticket returned. fused_gemv_fp8's gate_up
// diagnostics (its SM, units, last and first unit landed) take the records
// from kTimelineGateUpDiag on, past the router's (at most 256 blocks).
inline constexpr int kTimelineGateUpWarps = 2048, kTimelineRouterBlocks = 2048;
inline constexpr int kTimelineWarps =
    kTimelineGateUpWarps + kTimelineRouterBlocks;
inline constexpr int kTimelineGateUpDiag = kTimelineGateUpWarps + 512;
inline constexpr int kTimelineGateUpDiagWarps =
    kTimelineWarps - kTimelineGateUpDiag;
inline constexpr int kTimelineWarpFields = 4;
// Then fused_gemv_fp8's stage landings: warp 0's lane 0 stamps each unit of
// its block as the unit's bytes land (gate_up's blocks, then down's; the
// first kTimelineLandingUnits units of the first kTimelineLandingBlocks
// blocks), which the host bins into the rate the weights arrive at.
inline constexpr int kTimelineLandingBlocks = 512, kTimelineLandingUnits = 32;
// One kernel's (gate_up's or down's) unit stamps in one of the two regions.
inline constexpr int kTimelineUnitStamps =
    kTimelineLandingBlocks * kTimelineLandingUnits;
inline constexpr int kTimelineLandings =
    kTimelineSlots + kTimelineWarps * kTimelineWarpFields;
// And when warp 0 finished computing each of those units (same layout).
inline constexpr int kTimelineComputed =
    kTimelineLandings + 2 * kTimelineUnitStamps;
inline constexpr int kTimelineWords =
    kTimelineComputed + 2 * kTimelineUnitStamps;
constexpr bool TimelineIsMin(int i) {
  return i == 0 || i == 6 || i == 8 || i == 10 || i == 14;
}
#if defined(MOETUNE_TIMELINE) && defined(__CUDACC__)
__device__ __forceinline__ unsigned long long TimelineNow() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define TL_MIN(buf, i) atomicMin((buf).timeline + (i), TimelineNow())
#define TL_MAX(buf, i) atomicMax((buf).timeline + (i), TimelineNow())
// Record idx's field f (records after the kTimelineSlots stamps) = v.
#define TL_RAW(buf, idx, f, v)                                                \
  ((idx) < kTimelineWarps                                                     \
       ? (void)((buf).timeline[kTimelineSlots + kTimelineWarpFields * (idx) + \
                               (f)] = (v))                                    \
       : (void)0)
#define TL_WARP(buf, w, f) \
  ((w) < kTimelineGateUpWarps ? TL_RAW(buf, w, f, TimelineNow()) : (void)0)
#define TL_UNIT_STAMP(buf, region, mode, i)                                \
  (blockIdx.x < kTimelineLandingBlocks && (i) < kTimelineLandingUnits      \
       ? (void)((buf).timeline[(region) + (mode)*kTimelineUnitStamps +     \
                               blockIdx.x * kTimelineLandingUnits + (i)] = \
                    TimelineNow())                                         \
       : (void)0)
#define TL_LANDED(buf, mode, i) TL_UNIT_STAMP(buf, kTimelineLandings, mode, i)
#define TL_COMPUTED(buf, mode, i) TL_UNIT_STAMP(buf, kTimelineComputed, mode, i)
#define TL_ROUTER_BLOCK(buf, f)                                           \
  (blockIdx.x < kTimelineRouterBlocks                                     \
       ? TL_RAW(buf, kTimelineGateUpWarps + blockIdx.x, f, TimelineNow()) \
       : (void)0)
#else
#define TL_MIN(buf, i) ((void)0)
#define TL_MAX(buf, i) ((void)0)
#define TL_WARP(buf, w, f) ((void)0)
#define TL_ROUTER_BLOCK(buf, f) ((void)0)
#define TL_LANDED(buf, mode, i) ((void)0)
#define TL_COMPUTED(buf, mode, i) ((void)0)
#define TL_RAW(buf, idx, f, v) ((void)0)
#endif
// gate_up's stamps (lane 0 of warp w): the earliest into slot `first`, the
// latest into `last`, and the warp's own field `f`; at its start, and when
// it is released into the routed part (after griddepcontrol.wait).
#define TL_GATE_UP_STAMP(buf, w, lane, first, last, f) \
  do {                                                 \
    if ((lane) == 0) {                                 \
      TL_MIN(buf, first);                              \
      TL_MAX(buf, last);                               \
      TL_WARP(buf, w, f);                              \
    }                                                  \
  } while (0)
#define TL_GATE_UP_START(buf, w, lane) TL_GATE_UP_STAMP(buf, w, lane, 6, 12, 0)
#define TL_GATE_UP_RELEASED(buf, w, lane) \
  TL_GATE_UP_STAMP(buf, w, lane, 8, 13, 2)

struct LayerArgs {
  Geometry geo;
  int block_n = 0, block_k = 0;
  MatrixView gate_up, down;
  const uint16_t* router_w = nullptr;  // bf16 [experts][hidden]
  RunBuffers buf;
  int device = 0;
  int sm_count = 0;
  void* cublas = nullptr;  // cublasHandle_t of the runner's context
  // The router also writes the input as FP8 hi + lo blocks (x_fp8).
  bool router_writes_x_fp8 = false;
};

}  // namespace moetune::gpu
