// Synthetic GLM-5 weights as pure functions of (seed, layer, tensor, index):
// a counter-based hash, so the GPU generates a rank's shard in place and the
// CPU reference regenerates exactly the rows it needs (docs/design.md §2).
// Shared bit-for-bit by host and device code; integer arithmetic only, except
// one exactly-rounded multiply, so nvcc's FMA contraction cannot change a bit.
// Pure functions; thread-safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/host_device.h"

namespace moetune::weights {

// Tensor identifiers. Per-expert tensors are kExpertBase + 2 * expert (+1 for
// down); block scales of an NVFP4 tensor hash under tensor | kScaleFlag.
enum TensorId : uint32_t {
  kEmbedding = 1,
  kLmHead = 2,
  kFinalNorm = 3,
  kAttnNorm = 10,
  kFfnNorm = 11,
  kQA = 12,  // [q_lora, hidden]
  kQANorm = 13,
  kQB = 14,   // [heads * (nope + rope), q_lora]
  kKVA = 15,  // [kv_lora + rope, hidden]
  kKVANorm = 16,
  kKVB = 17,        // [heads * (nope + v), kv_lora]
  kO = 18,          // [hidden, heads * v]
  kIndexerQB = 20,  // [idx_heads * idx_dim, q_lora]
  kIndexerK = 21,   // [idx_dim, hidden]
  kIndexerKNorm = 22,
  kIndexerWeights = 23,    // [idx_heads, hidden]
  kIndexerKNormBias = 24,  // the indexer key LayerNorm's bias
  kRouter = 30,            // [experts, hidden]
  kRouterBias = 31,        // [experts] e_score_correction_bias
  kSharedGateUp = 32,      // [2 * moe_inter, hidden]
  kSharedDown = 33,        // [hidden, moe_inter]
  kDenseGateUp = 34,       // [2 * dense_inter, hidden]
  kDenseDown = 35,         // [hidden, dense_inter]
  kKvCache = 40,           // synthetic past latent KV (index = token * dim + d)
  kIndexerKCache = 41,     // synthetic past indexer keys
  kInput = 42,             // token ids of the step
  kExpertBase = 1024,
};
inline constexpr uint32_t kScaleFlag = 0x80000000u;

MOETUNE_HD uint32_t ExpertGateUp(int expert) {
  return kExpertBase + 2u * static_cast<uint32_t>(expert);
}
MOETUNE_HD uint32_t ExpertDown(int expert) {
  return kExpertBase + 2u * static_cast<uint32_t>(expert) + 1u;
}

// splitmix64 finaliser: a bijective 64-bit mix.
MOETUNE_HD uint64_t Mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

MOETUNE_HD uint64_t Hash(uint64_t seed, uint32_t layer, uint32_t tensor,
                         uint64_t index) {
  const uint64_t stream =
      Mix64(seed ^ Mix64((static_cast<uint64_t>(layer) << 32) | tensor));
  return Mix64(stream + index);
}

// Uniform in [-1, 1): 24 random bits, exact in float.
MOETUNE_HD float UnitUniform(uint64_t h) {
  const int32_t bits = static_cast<int32_t>(h >> 40);  // [0, 2^24)
  return static_cast<float>(bits - (1 << 23)) * (1.0f / 8388608.0f);
}

// `value` rounded to the nearest-even BF16, kept as float (infinities and
// NaN unchanged).
MOETUNE_HD float RoundBf16(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u) return value;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  float rounded;
  memcpy(&rounded, &bits, sizeof(rounded));
  return rounded;
}

// A BF16 weight of a dense tensor [rows, k] (row-major, index = row*k+col),
// as float: uniform(-1,1) * scale, rounded to nearest-even BF16.
MOETUNE_HD float Bf16Weight(uint64_t seed, uint32_t layer, uint32_t tensor,
                            uint64_t index, float scale) {
  return RoundBf16(UnitUniform(Hash(seed, layer, tensor, index)) * scale);
}

// Byte `byte_index` of an NVFP4 tensor's packed codes ([rows, k/2] row-major,
// low nibble = even column): uniform over the 16 E2M1 codes.
MOETUNE_HD uint8_t Nvfp4CodeByte(uint64_t seed, uint32_t layer, uint32_t tensor,
                                 uint64_t byte_index) {
  return static_cast<uint8_t>(Hash(seed, layer, tensor, byte_index) >> 56);
}

// Block scale `block_index` ([rows, k/16] row-major) as an E4M3 byte:
// positive, exponent field 5..8 and any mantissa, i.e. 0.25 to 3.75.
MOETUNE_HD uint8_t Nvfp4ScaleByte(uint64_t seed, uint32_t layer,
                                  uint32_t tensor, uint64_t block_index) {
  const uint64_t h = Hash(seed, layer, tensor | kScaleFlag, block_index);
  const uint32_t exponent = 5u + static_cast<uint32_t>((h >> 60) & 3u);
  const uint32_t mantissa = static_cast<uint32_t>((h >> 56) & 7u);
  return static_cast<uint8_t>((exponent << 3) | mantissa);
}

// The FP32 tensor scale of an NVFP4 tensor with reduction length k: keeps an
// output's variance near its input's (uniform E2M1 codes have rms ~2.9, the
// block scales ~2.0): 1 / (6 * sqrt(k)). Host-only; kernels receive it as a
// parameter, so host and device use the same float.
inline float Nvfp4TensorScale(int64_t k) {
  return 1.0f / (6.0f * std::sqrt(static_cast<float>(k)));
}

}  // namespace moetune::weights
