// The "tiled" device layout of an NVFP4 matrix that the tensor-core kernels
// (fused_gemv, grouped_mma) stream, and the bit tricks that decode it. Same
// bytes as NVFP4 (4 bits a weight, one E4M3 scale per 16 K), reordered so
// that one 16-byte load per lane feeds four mma.m16n8k16 A fragments with no
// shuffles, and a 3-bit magnitude + sign land where an fp16 wants them.
// Plain C++ with MOETUNE_HD: host tests check it; kernels decode with it.
// Pure functions; thread-safe.
//
// A matrix [rows, K] is cut into row tiles of 16 rows and chunks of 64 K.
// Chunk (rt, kc) is 512 code bytes: 32 lanes x 16 bytes, lane L = 4g + c
// (g = L / 4 the mma "group", c = L % 4). Lane (g, c) holds rows {g, g+8} and
// the 16 columns [16c, 16c + 16) of the chunk: one block-scale block per row.
// Its 16 bytes are 4 words, word j feeding mma j of the chunk; element
// (register r, half h) of word j is row g + 8 * (r & 1), chunk column
// 16c + 4j + 2 * (r >> 1) + h. The mma's k index kk maps to chunk column
// 16 * (kk % 8 / 2) + 4j + (kk / 8) * 2 + kk % 2, for A and B alike, so a
// dot product over the chunk is unchanged and lane c's activations are the
// 16 consecutive halves [16c, 16c + 16): two 16-byte loads, no permutation.
//
// Inside a word each element keeps its 3-bit E2M1 magnitude and sign at the
// bit positions below, chosen so that four masks (two after a rotate or
// shifts) give four fp16x2 registers whose halves read 0 s000 mmm0 0000 0000:
// exponent bits e1 e0 and the top mantissa bit m of E2M1, i.e. fp16 value
// E2M1 * 2^-14 (E2M1's subnormal 0.5 becomes fp16's subnormal 2^-15).
//
// Block scales: for row tile rt and group kg of 4 chunks, 256 bytes: lane L
// at 8 bytes, chunk q of the group at byte 2q: (scale of row g, scale of row
// g + 8) of block 4 * kc + c. Groups past the matrix end are padding (0).
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace moetune::gpu::tiled {

inline constexpr int kTileRows = 16;
inline constexpr int kChunkK = 64;
inline constexpr int kChunkBytes = 512;
inline constexpr int kGroupChunks = 4;
inline constexpr int kScaleGroupBytes = 256;

MOETUNE_HD int ChunksOf(int k) { return (k + kChunkK - 1) / kChunkK; }
MOETUNE_HD int GroupsOf(int k) {
  return (ChunksOf(k) + kGroupChunks - 1) / kGroupChunks;
}
MOETUNE_HD int64_t CodeBytesOf(int rows, int k) {
  return static_cast<int64_t>(rows / kTileRows) * ChunksOf(k) * kChunkBytes;
}
MOETUNE_HD int64_t ScaleBytesOf(int rows, int k) {
  return static_cast<int64_t>(rows / kTileRows) * GroupsOf(k) *
         kScaleGroupBytes;
}

// Byte offset of lane `lane`'s 16 code bytes of chunk (rt, kc).
MOETUNE_HD int64_t CodeOffset(int rt, int kc, int lane, int chunks) {
  return ((static_cast<int64_t>(rt) * chunks + kc) * 32 + lane) * 16;
}
// Byte offset of lane `lane`'s scale pair of chunk (rt, kc).
MOETUNE_HD int64_t ScaleOffset(int rt, int kc, int lane, int groups) {
  return ((static_cast<int64_t>(rt) * groups + kc / kGroupChunks) * 32 + lane) *
             8 +
         (kc % kGroupChunks) * 2;
}

// Row within the 16-row tile, and column within the 64-column chunk, of
// element (r, h) of word j of lane (g, c).
MOETUNE_HD int ElementRow(int g, int r) { return g + 8 * (r & 1); }
MOETUNE_HD int ElementCol(int c, int j, int r, int h) {
  return 16 * c + 4 * j + 2 * (r >> 1) + h;
}

// Bit of the lowest magnitude bit, and of the sign, of element (r, h).
MOETUNE_HD int MagnitudeBit(int r, int h) {
  const int low = r == 0 ? 9 : r == 1 ? 12 : r == 2 ? 3 : 6;
  return low + 16 * h;
}
MOETUNE_HD int SignBit(int r, int h) {
  switch (r) {
    case 0:
      return h ? 31 : 15;
    case 1:
      return h ? 2 : 18;
    case 2:
      return h ? 16 : 0;
    default:
      return h ? 17 : 1;
  }
}

// Places one 4-bit E2M1 code (bit 3 = sign) as element (r, h) of a word.
MOETUNE_HD uint32_t PlaceCode(uint32_t code, int r, int h) {
  return ((code & 7u) << MagnitudeBit(r, h)) |
         (((code >> 3) & 1u) << SignBit(r, h));
}
// Reads element (r, h) of a word back as a 4-bit E2M1 code.
MOETUNE_HD uint32_t CodeAt(uint32_t word, int r, int h) {
  return ((word >> MagnitudeBit(r, h)) & 7u) |
         (((word >> SignBit(r, h)) & 1u) << 3);
}

inline constexpr uint32_t kFp16Mask = 0x8E008E00u;  // sign + e1 e0 m, x2
inline constexpr uint32_t kMagMask = 0x0E000E00u;   // e1 e0 m, x2
inline constexpr uint32_t kSignMask = 0x80008000u;  // sign, x2

// The four fp16x2 A registers of a word, each half E2M1 * 2^-14 exactly:
// 11 integer operations for 8 weights.
MOETUNE_HD void DecodeWord(uint32_t w, uint32_t out[4]) {
  out[0] = w & kFp16Mask;
  out[1] = ((w >> 3) | (w << 29)) & kFp16Mask;  // a funnel-shift rotate
  out[2] = ((w << 6) & kMagMask) | ((w << 15) & kSignMask);
  out[3] = ((w << 3) & kMagMask) | ((w << 14) & kSignMask);
}

}  // namespace moetune::gpu::tiled
