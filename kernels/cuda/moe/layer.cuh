// The plain structs one MoE layer run passes between the runner, the router
// and the backends: the rank's geometry, its generated weights and the
// device buffers of one run. No logic beyond derived sizes. Not thread-safe.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/base/launch_policy.h"
#include "kernels/cuda/moe/moe_gpu.h"

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
  int max_tiles = 0;       // 64-token tiles of the slots, upper bound
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
  int* meta = nullptr;  // slots, routed slots, positions, 64-token tiles, wide
                        // slots (kMeta*)
  int* slot_expert = nullptr;   // [max_slots] local expert index
  int* slot_tok_off = nullptr;  // [max_slots] first position
  int* slot_ntok = nullptr;     // [max_slots]
  int* tile_prefix = nullptr;   // [max_slots + 1]
  // [max_tiles] each 64-token tile of the slots, in slot order: its first
  // position, and its local expert | (its tokens << 16). fused_gemv's wide
  // kernel walks tiles, not slots.
  int2* tile_info = nullptr;
  int* tok_list = nullptr;      // [max_positions] token id
  float* tok_w = nullptr;       // [max_positions] routing weight
  float* gu_partial = nullptr;  // [max_positions][2 * inter_local]
  int* gu_counters = nullptr;   // [max_tiles][inter_local / 8]
  __half* h = nullptr;          // [max_positions][inter_local]
  float* y = nullptr;           // [batch][hidden], the output
  // fused_gemv_fp8's activations (act_fp8.cuh): the input's and h's blocks
  // of 16 as hi + lo E4M3 bytes in wgmma B layout (8 bytes a value, mostly
  // zeros) and their inverse scales.
  uint8_t* x_fp8 = nullptr;    // [batch][hidden * 8]
  float* x_fp8_inv = nullptr;  // [batch][hidden / 16]
  uint8_t* h_fp8 = nullptr;    // [max_positions][inter_local * 8]
  float* h_fp8_inv = nullptr;  // [max_positions][inter_local / 16]
};

inline constexpr int kMetaSlots = 0, kMetaRouted = 1, kMetaPositions = 2,
                     kMetaTiles = 3, kMetaWide = 4, kMetaCount = 5;
// Above kWideSplitBatch tokens, slots of more than kWideTokens tokens lead
// the slot list (the shared expert first, then the wide routed ones, then
// the rest), so that a kernel sized for one 8-token n-tile can stream the
// rest (meta[kMetaWide] of them lead; 0 at smaller batches, whose slots
// stay in expert order: fused_gemv keeps one kernel there, and its
// stream-K balance measures best with the wide slots spread).
inline constexpr int kWideTokens = 8;
inline constexpr int kWideSplitBatch = 16;
inline constexpr int kGroupedTokens = 64;  // grouped_mma's token tile

struct LayerArgs {
  Geometry geo;
  backends::Tile tile;
  MatrixView gate_up, down;
  const uint16_t* router_w = nullptr;  // bf16 [experts][hidden]
  RunBuffers buf;
  int device = 0;
  int sm_count = 0;
  void* cublas = nullptr;  // cublasHandle_t of the runner's context
  // The router also writes the input as FP8 hi + lo blocks (x_fp8).
  bool router_writes_x_fp8 = false;
  // How the layer's overlapped kernel (its router) is launched.
  LaunchPolicy launch;
};

}  // namespace moetune::gpu
