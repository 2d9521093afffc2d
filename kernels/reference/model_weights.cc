#include "kernels/reference/model_weights.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "kernels/model/cache_gen.h"
#include "kernels/model/kv_fp8_format.h"
#include "kernels/model/weight_gen.h"

namespace moetune::ref {
namespace {

Nvfp4TensorDesc Nvfp4Desc(const StepSpec& spec, int layer, uint32_t tensor,
                          int64_t rows, int64_t k) {
  Nvfp4TensorDesc desc;
  desc.seed = spec.seed;
  desc.layer = static_cast<uint32_t>(layer);
  desc.tensor = tensor;
  desc.rows = rows;
  desc.k = k;
  desc.tensor_scale = weights::Nvfp4TensorScale(k);
  return desc;
}

}  // namespace

Nvfp4TensorDesc ExpertGateUpDesc(const StepSpec& spec, int layer, int expert) {
  const model::ModelConfig& c = spec.config;
  return Nvfp4Desc(spec, layer, weights::ExpertGateUp(expert),
                   2 * c.moe_intermediate, c.hidden);
}

Nvfp4TensorDesc ExpertDownDesc(const StepSpec& spec, int layer, int expert) {
  const model::ModelConfig& c = spec.config;
  return Nvfp4Desc(spec, layer, weights::ExpertDown(expert), c.hidden,
                   c.moe_intermediate);
}

Nvfp4TensorDesc SharedGateUpDesc(const StepSpec& spec, int layer) {
  const model::ModelConfig& c = spec.config;
  return Nvfp4Desc(spec, layer, weights::kSharedGateUp, 2 * c.moe_intermediate,
                   c.hidden);
}

Nvfp4TensorDesc SharedDownDesc(const StepSpec& spec, int layer) {
  const model::ModelConfig& c = spec.config;
  return Nvfp4Desc(spec, layer, weights::kSharedDown, c.hidden,
                   c.moe_intermediate);
}

Nvfp4TensorDesc DenseGateUpDesc(const StepSpec& spec, int layer) {
  const model::ModelConfig& c = spec.config;
  return Nvfp4Desc(spec, layer, weights::kDenseGateUp, 2 * c.dense_intermediate,
                   c.hidden);
}

Nvfp4TensorDesc DenseDownDesc(const StepSpec& spec, int layer) {
  const model::ModelConfig& c = spec.config;
  return Nvfp4Desc(spec, layer, weights::kDenseDown, c.hidden,
                   c.dense_intermediate);
}

namespace {

// {rows, k} of a BF16 projection; {0, 0} for other ids.
std::pair<int64_t, int64_t> Bf16Shape(const model::ModelConfig& c,
                                      uint32_t tensor) {
  using P = std::pair<int64_t, int64_t>;
  const int64_t heads = c.num_heads;
  switch (tensor) {
    case weights::kQA:
      return P{c.q_lora_rank, c.hidden};
    case weights::kQB:
      return P{heads * (c.qk_nope_dim + c.qk_rope_dim), c.q_lora_rank};
    case weights::kKVA:
      return P{c.kv_lora_rank + c.qk_rope_dim, c.hidden};
    case weights::kKVB:
      return P{heads * (c.qk_nope_dim + c.v_head_dim), c.kv_lora_rank};
    case weights::kO:
      return P{c.hidden, heads * c.v_head_dim};
    case weights::kIndexerQB:
      return P{int64_t{c.index_heads} * c.index_head_dim, c.q_lora_rank};
    case weights::kIndexerK:
      return P{c.index_head_dim, c.hidden};
    case weights::kIndexerWeights:
      return P{c.index_heads, c.hidden};
    case weights::kRouter:
      return P{c.num_experts, c.hidden};
    case weights::kEmbedding:
      return P{c.vocab, c.hidden};
    case weights::kLmHead:
      return P{c.vocab, c.hidden};
    case weights::kDenseGateUp:
      return P{2 * int64_t{c.dense_intermediate}, c.hidden};
    case weights::kDenseDown:
      return P{c.hidden, c.dense_intermediate};
    default:
      return P{0, 0};
  }
}

}  // namespace

Bf16TensorDesc Bf16Desc(const StepSpec& spec, int layer, uint32_t tensor) {
  const auto [rows, k] = Bf16Shape(spec.config, tensor);
  return Bf16TensorDesc{spec.seed, static_cast<uint32_t>(layer), tensor, rows,
                        k};
}

namespace {

Precision PrecisionOf(const Quantization& q, uint32_t tensor) {
  switch (tensor) {
    case weights::kQA:
    case weights::kQB:
    case weights::kKVA:
    case weights::kKVB:
    case weights::kO:
    case weights::kIndexerQB:
    case weights::kIndexerK:
    case weights::kIndexerWeights:
      return q.attention;
    case weights::kLmHead:
      return q.lm_head;
    case weights::kDenseGateUp:
    case weights::kDenseDown:
      return q.dense_mlp;
    default:
      return Precision::kBf16;
  }
}

}  // namespace

WeightDesc ProjectionDesc(const StepSpec& spec, int layer, uint32_t tensor) {
  WeightDesc desc;
  desc.bf16 = Bf16Desc(spec, layer, tensor);
  desc.nvfp4 = PrecisionOf(spec.quantization, tensor) == Precision::kNvfp4;
  if (desc.nvfp4) {
    desc.fp4 = Nvfp4Desc(spec, layer, tensor, desc.bf16.rows, desc.bf16.k);
  }
  return desc;
}

std::vector<float> NormGamma(const StepSpec& spec, int layer, uint32_t tensor,
                             int n) {
  std::vector<float> gamma(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    gamma[i] =
        1.0f + weights::Bf16Weight(spec.seed, static_cast<uint32_t>(layer),
                                   tensor, static_cast<uint64_t>(i), 0.1f);
  }
  return gamma;
}

std::vector<float> NormBias(const StepSpec& spec, int layer, uint32_t tensor,
                            int n) {
  std::vector<float> beta(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    beta[i] = weights::Bf16Weight(spec.seed, static_cast<uint32_t>(layer),
                                  tensor, static_cast<uint64_t>(i), 0.1f);
  }
  return beta;
}

int TokenId(const StepSpec& spec, int sequence) {
  if (spec.generated != nullptr && !spec.generated->tokens.empty()) {
    return spec.generated->tokens[sequence];
  }
  const uint64_t h = weights::Hash(spec.seed, 0, weights::kInput,
                                   static_cast<uint64_t>(sequence));
  return static_cast<int>(h % static_cast<uint64_t>(spec.config.vocab));
}

namespace {

// Entry t of a generated (appended) cache, when t is past the synthetic
// ones; false otherwise.
bool GeneratedEntry(
    const StepSpec& spec,
    const std::vector<std::vector<std::vector<float>>> Generated::*cache,
    int layer, int sequence, int t, int dim, float* out) {
  if (spec.generated == nullptr || t < spec.generated->prefilled) return false;
  const std::vector<float>& entries = (spec.generated->*cache)[layer][sequence];
  const size_t at = static_cast<size_t>(t - spec.generated->prefilled) * dim;
  std::copy(entries.begin() + at, entries.begin() + at + dim, out);
  return true;
}

}  // namespace

void LatentCacheEntry(const StepSpec& spec, int layer, int sequence, int t,
                      float* out) {
  const model::ModelConfig& c = spec.config;
  if (GeneratedEntry(spec, &Generated::latent, layer, sequence, t,
                     c.kv_lora_rank + c.qk_rope_dim, out)) {
    return;
  }
  for (int d = 0; d < c.kv_lora_rank + c.qk_rope_dim; ++d) {
    out[d] = cache::LatentValue(spec.seed, layer, c.kv_lora_rank, c.qk_rope_dim,
                                sequence, t, d);
  }
  if (spec.kv_cache == KvCacheDtype::kFp8E4M3) {
    kvfp8::RoundTripLatent(out, c.kv_lora_rank);
  }
}

void IndexerKeyCacheEntry(const StepSpec& spec, int layer, int sequence, int t,
                          float* out) {
  const int dim = spec.config.index_head_dim;
  if (GeneratedEntry(spec, &Generated::keys, layer, sequence, t, dim, out)) {
    return;
  }
  for (int d = 0; d < dim; ++d) {
    out[d] = nvfp4::E4M3ToFloat(
        cache::IndexKeyByte(spec.seed, layer, dim, sequence, t, d));
  }
}

}  // namespace moetune::ref
