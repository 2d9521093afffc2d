// The NVFP4 weight format (docs/design.md §2), shared bit-for-bit by the CPU
// reference and the CUDA kernels.
//
//   w = e2m1(code) * e4m3(block_scale) * tensor_scale
//
// Codes are 4-bit E2M1 {0, .5, 1, 1.5, 2, 3, 4, 6} with bit 3 the sign; two
// per byte, low nibble = even column. One FP8 E4M3 block scale per 16
// consecutive K elements of a row; one FP32 scale per tensor.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/host_device.h"

namespace moetune::nvfp4 {

inline constexpr int kBlockSize = 16;  // K elements per block scale

// Magnitude of an E2M1 code's low 3 bits, times two (exact integers).
// Codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6; doubled: 0 1 2 3 4 6 8 12.
MOETUNE_HD int E2M1TwiceMagnitude(uint32_t code3) {
  if (code3 < 4) return static_cast<int>(code3);
  return code3 == 7 ? 12 : static_cast<int>(2 * code3 - 4);
}

MOETUNE_HD float QuietNaN() {
  const uint32_t bits = 0x7fc00000u;
  float value;
  memcpy(&value, &bits, sizeof(value));
  return value;
}

MOETUNE_HD float E2M1ToFloat(uint32_t code) {
  const float magnitude =
      0.5f * static_cast<float>(E2M1TwiceMagnitude(code & 7u));
  return (code & 8u) ? -magnitude : magnitude;
}

// FP8 E4M3 (fn variant: no infinities; 0x7f / 0xff are NaN), bias 7.
MOETUNE_HD float E4M3ToFloat(uint32_t byte) {
  const uint32_t sign = (byte >> 7) & 1u;
  const uint32_t exponent = (byte >> 3) & 0xfu;
  const uint32_t mantissa = byte & 7u;
  float value;
  if ((byte & 0x7fu) == 0x7fu) {
    value = QuietNaN();
  } else if (exponent == 0) {
    value = static_cast<float>(mantissa) * (1.0f / 512.0f);  // 2^-6 * m/8
  } else {
    // 2^(e-7) * (1 + m/8), built exactly from integers.
    const float significand = static_cast<float>(8 + mantissa) * 0.125f;
    const int shift = static_cast<int>(exponent) - 7;
    value = shift >= 0 ? significand * static_cast<float>(1u << shift)
                       : significand / static_cast<float>(1u << -shift);
  }
  return sign ? -value : value;
}

// The E4M3 byte nearest to `value` (ties to even), saturating at +-448
// (the fn variant's largest finite value); NaN gives 0x7f. The inverse of
// E4M3ToFloat on its finite values.
MOETUNE_HD uint8_t FloatToE4M3(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  const uint32_t sign = (bits >> 31) << 7;
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return 0x7f;  // NaN
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent < -6) {
    // Subnormal (or zero): units of 2^-9, rounded to nearest even; 8 units
    // is the smallest normal, whose byte is 8 as well.
    float units;
    const float scaled = (magnitude == 0 ? 0.0f : value) * 512.0f;
    units = scaled < 0 ? -scaled : scaled;
    const uint32_t whole = static_cast<uint32_t>(units);
    const float rest = units - static_cast<float>(whole);
    const uint32_t q =
        whole + ((rest > 0.5f || (rest == 0.5f && (whole & 1u))) ? 1u : 0u);
    return static_cast<uint8_t>(sign | q);
  }
  uint32_t mantissa = (magnitude >> 20) & 7u;
  const uint32_t rest = magnitude & 0xfffffu;
  int biased = exponent + 7;
  if (rest > 0x80000u || (rest == 0x80000u && (mantissa & 1u))) {
    if (++mantissa == 8) {
      mantissa = 0;
      ++biased;
    }
  }
  if (biased > 15 || (biased == 15 && mantissa == 7)) {
    return static_cast<uint8_t>(sign | 0x7e);  // saturate at 448
  }
  return static_cast<uint8_t>(sign | (static_cast<uint32_t>(biased) << 3) |
                              mantissa);
}

// Bytes of a packed [rows, k] NVFP4 tensor's codes and block scales.
MOETUNE_HD int64_t CodeBytes(int64_t rows, int64_t k) { return rows * k / 2; }
MOETUNE_HD int64_t ScaleBytes(int64_t rows, int64_t k) {
  return rows * (k / kBlockSize);
}

}  // namespace moetune::nvfp4
