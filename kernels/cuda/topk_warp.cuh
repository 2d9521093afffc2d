// One warp's top-k of up to 256 routing scores, shared by the router's last
// block and fused_gemv_fp8's gate_up (which routes its one token itself
// rather than wait for the router's tail). Lane l holds experts l + 32 i,
// i < kTopKPerLane. Ties go to the lower expert index, as in the reference.
// Device code only.
#pragma once

#include <cstdint>

namespace moetune::gpu {

inline constexpr int kTopKPerLane = 8;  // 256 experts over a warp

// Floats as unsigned keys with the same order (larger float, larger key).
__device__ __forceinline__ uint32_t OrderedKey(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Picks top_k of the warp's keys (key 0: no expert, never picked): per round
// a max-reduction of the keys, then a min-reduction of the indices holding
// it. on_pick(r, e, value) runs on the lane holding pick r (expert e, its
// `value`). Returns this lane's picked entries as bits (bit i: l + 32 i).
template <class OnPick>
__device__ __forceinline__ uint32_t WarpTopK(
    const uint32_t (&key)[kTopKPerLane], const float (&value)[kTopKPerLane],
    int top_k, OnPick&& on_pick) {
  const int lane = threadIdx.x % 32;
  uint32_t taken = 0;
  for (int r = 0; r < top_k; ++r) {
    uint32_t best = 0;
    int bi = -1;
    float bv = 0.0f;
#pragma unroll
    for (int i = 0; i < kTopKPerLane; ++i) {
      if (!((taken >> i) & 1u) && key[i] > best) {
        best = key[i];
        bi = i;
        bv = value[i];
      }
    }
    const uint32_t top = __reduce_max_sync(~0u, best);
    const uint32_t cand =
        (bi >= 0 && best == top) ? static_cast<uint32_t>(lane + 32 * bi) : ~0u;
    const uint32_t e = __reduce_min_sync(~0u, cand);
    if ((e & 31u) == static_cast<uint32_t>(lane)) {
      taken |= 1u << (e >> 5);
      on_pick(r, static_cast<int>(e), bv);
    }
  }
  return taken;
}

}  // namespace moetune::gpu
