// The E4M3 variant of the tiled NVFP4 layout (tiled_nvfp4.h), read by
// fused_gemv_fp8: the same chunks, lanes, words and block scales, the same
// element of each (row, column) per word, but each element's sign and 3-bit
// E2M1 magnitude sit where five integer operations per word turn the word
// into two registers of four FP8 E4M3 bytes for mma.m16n8k32 (instead of the
// fp16 layout's eleven operations for four fp16x2 registers, plus four
// HMUL2 for the block scale, which the FP8 kernel applies after the mma).
// Plain C++ with MOETUNE_HD: host tests check it; kernels decode with it.
// Pure functions; thread-safe.
//
// Word j of lane (g, c) holds rows g (r8 = 0) and g + 8 (r8 = 1) of chunk
// columns 16c + 4j + b, b = 0..3. Decoded, register lo holds row g and
// register hi row g + 8, byte b = column 16c + 4j + b. An E4M3 byte
// s 0 0 e1 e0 m 0 0 (sign, exponent field e1 e0, mantissa m00) is exactly
// E2M1 * 2^-6, E2M1's subnormal 0.5 included (E4M3's subnormal 2^-7).
//  - row g: sign at bit 8b + 7, magnitude e1 e0 m at bits 8b + 4..2, so
//    lo = w & 0x9C9C9C9C;
//  - row g + 8 in the other four bits of byte b: m at 8b, e0 at 8b + 1, sign
//    at 8b + 5, e1 at 8b + 6; with t = w & 0x63636363, (t << 2) puts m, e0
//    and the sign in place and (t >> 2) puts e1 in place, and one bit select
//    on 0xCCCCCCCC keeps each where it belongs (every other bit it keeps is
//    zero in t).
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace moetune::gpu::tiled_e4m3 {

inline constexpr uint32_t kRowLoMask = 0x9C9C9C9Cu;   // row g's bits
inline constexpr uint32_t kRowHiMask = 0x63636363u;   // row g + 8's bits
inline constexpr uint32_t kSelectMask = 0xCCCCCCCCu;  // from t << 2
// The decoded value is E2M1 * 2^-6; outputs are scaled back by 2^6.
inline constexpr float kDecodeScale = 64.0f;

// Element (r8, b) of a word: row g + 8 * r8, column 16c + 4j + b.
MOETUNE_HD uint32_t PlaceCode(uint32_t code, int r8, int b) {
  const uint32_t s = (code >> 3) & 1u, e1 = (code >> 2) & 1u,
                 e0 = (code >> 1) & 1u, m = code & 1u;
  const int base = 8 * b;
  if (r8 == 0) return ((code & 7u) << (base + 2)) | (s << (base + 7));
  return (m << base) | (e0 << (base + 1)) | (s << (base + 5)) |
         (e1 << (base + 6));
}

// Reads element (r8, b) of a word back as a 4-bit E2M1 code.
MOETUNE_HD uint32_t CodeAt(uint32_t word, int r8, int b) {
  const uint32_t byte = (word >> (8 * b)) & 0xffu;
  if (r8 == 0) return ((byte >> 2) & 7u) | ((byte >> 7) << 3);
  return (byte & 1u) | (((byte >> 1) & 1u) << 1) | (((byte >> 6) & 1u) << 2) |
         (((byte >> 5) & 1u) << 3);
}

// The two A registers of a word: four E4M3 bytes of row g (lo) and of row
// g + 8 (hi), each byte E2M1 * 2^-6 exactly. Five integer operations.
MOETUNE_HD void DecodeWord(uint32_t w, uint32_t* lo, uint32_t* hi) {
  *lo = w & kRowLoMask;
  const uint32_t t = w & kRowHiMask;
  *hi = ((t << 2) & kSelectMask) | ((t >> 2) & ~kSelectMask);
}

}  // namespace moetune::gpu::tiled_e4m3
