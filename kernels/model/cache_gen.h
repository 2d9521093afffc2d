// The synthetic KV caches of the decode step (docs/design.md §2): the past
// tokens' latent entries and DSA indexer keys as pure functions of (seed,
// layer, sequence, token, element), shared bit for bit by the CPU reference
// and the GPU, which stores them in the formats the model caches them in:
// the latent entries in BF16, the indexer keys in FP8 E4M3. The values are
// made exactly representable in those formats, so both sides read the same
// numbers. Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "kernels/model/nvfp4_format.h"
#include "kernels/model/weight_gen.h"

namespace moetune::cache {

// Hash index of element d of token t of sequence s in a cache of `dim`
// elements a token: each sequence has its own stream, and a longer context
// extends it.
MOETUNE_HD uint64_t CacheIndex(int sequence, int t, int dim, int d) {
  return (static_cast<uint64_t>(sequence) << 40) +
         static_cast<uint64_t>(t) * static_cast<uint64_t>(dim) +
         static_cast<uint64_t>(d);
}

// sqrt(3) * uniform(-1, 1): unit mean square. The constant is sqrt(3)
// rounded to float, written out so host and device multiply the same float.
MOETUNE_HD float UnitRmsValue(uint64_t seed, uint32_t layer, uint32_t tensor,
                              uint64_t index) {
  return 1.7320508f *
         weights::UnitUniform(weights::Hash(seed, layer, tensor, index));
}

// Element d of a past token's latent entry [kv_lora | rope], as BF16 (kept
// as float): the latent part has unit mean square (already RMS-normed), the
// rope part is uniform(-1, 1) (already rotated at its position).
MOETUNE_HD float LatentValue(uint64_t seed, int layer, int kv_lora, int rope,
                             int sequence, int t, int d) {
  const uint64_t index = CacheIndex(sequence, t, kv_lora + rope, d);
  const auto l = static_cast<uint32_t>(layer);
  const float value =
      d < kv_lora ? UnitRmsValue(seed, l, weights::kKvCache, index)
                  : weights::UnitUniform(
                        weights::Hash(seed, l, weights::kKvCache, index));
  return weights::RoundBf16(value);
}

// Element d of a past token's indexer key as its FP8 E4M3 byte: unit mean
// square (already LayerNorm-ed; the first rope dims already rotated).
MOETUNE_HD uint8_t IndexKeyByte(uint64_t seed, int layer, int dim,
                                int sequence, int t, int d) {
  return nvfp4::FloatToE4M3(
      UnitRmsValue(seed, static_cast<uint32_t>(layer),
                   weights::kIndexerKCache, CacheIndex(sequence, t, dim, d)));
}

}  // namespace moetune::cache
