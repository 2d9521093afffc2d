// The FP8 latent KV cache format (proto KvCacheDtype KV_FP8_E4M3, as
// FlashMLA's FP8 cache): a token's kv_lora latent values as FP8 E4M3 bytes
// with one FP32 scale per group of 128 consecutive values (the last group
// may be shorter), then its rope values as BF16:
//
//   scale = amax(group) / 448        (448: E4M3's largest finite value)
//   byte  = E4M3 nearest to v / scale (ties to even; 0 when scale is 0)
//   value = E4M3(byte) * scale
//
// Shared bit for bit by the CPU reference and the CUDA kernels: the
// division and the product are single IEEE roundings (no FMA can contract
// them), so host and device store and read the same numbers.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "kernels/model/nvfp4_format.h"

namespace moetune::kvfp8 {

inline constexpr int kGroupSize = 128;     // latent values a scale
inline constexpr float kE4M3Max = 448.0f;  // the fn variant's largest

MOETUNE_HD int Groups(int kv_lora) {
  return (kv_lora + kGroupSize - 1) / kGroupSize;
}

// Bytes of one token's entry: the FP8 latent, its scales, the BF16 rope
// key (GLM-5: 512 + 4 * 4 + 128 = 656, against 1152 in BF16).
MOETUNE_HD int64_t EntryBytes(int kv_lora, int rope) {
  return int64_t{kv_lora} + 4 * int64_t{Groups(kv_lora)} + 2 * int64_t{rope};
}

// Where a GPU cache row keeps a token's parts (bytes from the row's start):
// the FP8 latent, the scales (padded to 16 bytes), the BF16 rope key, so
// that each part starts 16-byte aligned when kv_lora is a multiple of 16.
// GLM-5: 512 | 16 | 128, 656 bytes, nothing padded.
struct RowLayout {
  int scales = 0;  // = kv_lora
  int rope = 0;
  int bytes = 0;  // the whole row, a multiple of 16 when rope is of 8
};
MOETUNE_HD RowLayout RowLayoutOf(int kv_lora, int rope) {
  const int scale_bytes = (4 * Groups(kv_lora) + 15) / 16 * 16;
  RowLayout layout;
  layout.scales = kv_lora;
  layout.rope = kv_lora + scale_bytes;
  layout.bytes = layout.rope + 2 * rope;
  return layout;
}

MOETUNE_HD float GroupScale(float amax) { return amax / kE4M3Max; }

MOETUNE_HD uint8_t Encode(float value, float scale) {
  return scale > 0.0f ? nvfp4::FloatToE4M3(value / scale) : uint8_t{0};
}

MOETUNE_HD float Decode(uint32_t byte, float scale) {
  return nvfp4::E4M3ToFloat(byte) * scale;
}

// The largest magnitude of values[0, n).
MOETUNE_HD float AbsMax(const float* values, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = values[i] < 0.0f ? -values[i] : values[i];
    amax = a > amax ? a : amax;
  }
  return amax;
}

// Replaces the kv_lora latent values with what the FP8 cache stores of them
// (encoded, then decoded): what attention reads back.
MOETUNE_HD void RoundTripLatent(float* latent, int kv_lora) {
  for (int g0 = 0; g0 < kv_lora; g0 += kGroupSize) {
    const int n = kv_lora - g0 < kGroupSize ? kv_lora - g0 : kGroupSize;
    const float scale = GroupScale(AbsMax(latent + g0, n));
    for (int i = 0; i < n; ++i) {
      latent[g0 + i] = Decode(Encode(latent[g0 + i], scale), scale);
    }
  }
}

}  // namespace moetune::kvfp8
