#include "kernels/reference/step_bytes.h"

#include <algorithm>
#include <set>

#include "kernels/model/kv_fp8_format.h"
#include "kernels/model/nvfp4_format.h"
#include "kernels/model/weight_gen.h"
#include "kernels/reference/model_weights.h"
#include "kernels/reference/moe_reference.h"
#include "kernels/reference/router.h"

namespace moetune::ref {
namespace {

constexpr int64_t kBf16 = 2;

// A [rows, k] matrix (or slice) in `precision`: BF16 values, or NVFP4 codes
// and block scales (4.5 bits a weight).
int64_t MatrixBytes(Precision precision, int64_t rows, int64_t k) {
  if (precision == Precision::kBf16) return kBf16 * rows * k;
  return nvfp4::CodeBytes(rows, k) + nvfp4::ScaleBytes(rows, k);
}

int64_t WholeBytes(const StepSpec& spec, int layer, uint32_t tensor) {
  const Bf16TensorDesc desc = Bf16Desc(spec, layer, tensor);
  return MatrixBytes(spec.quantization.attention, desc.rows, desc.k);
}

// One layer's attention block: q_a, kv_a whole; this rank's q_b rows, kv_b
// rows and o_proj columns (in the map's attention precision); the norms'
// BF16 gammas.
int64_t AttentionBytes(const StepSpec& spec, int layer) {
  const model::ModelConfig& c = spec.config;
  const Precision p = spec.quantization.attention;
  const int64_t heads = HeadsPerRank(c, spec.shard);
  const int64_t head_dim = c.qk_nope_dim + c.qk_rope_dim;
  int64_t bytes = WholeBytes(spec, layer, weights::kQA) +
                  WholeBytes(spec, layer, weights::kKVA);
  bytes += MatrixBytes(p, heads * head_dim, c.q_lora_rank);  // q_b
  bytes += MatrixBytes(p, heads * (c.qk_nope_dim + c.v_head_dim),
                       c.kv_lora_rank);                     // kv_b
  bytes += MatrixBytes(p, c.hidden, heads * c.v_head_dim);  // o_proj
  bytes += kBf16 * (2 * int64_t{c.hidden} + c.q_lora_rank + c.kv_lora_rank);
  return bytes;
}

int64_t IndexerBytes(const StepSpec& spec, int layer) {
  return WholeBytes(spec, layer, weights::kIndexerQB) +
         WholeBytes(spec, layer, weights::kIndexerK) +
         WholeBytes(spec, layer, weights::kIndexerWeights) +
         kBf16 * 2 * int64_t{spec.config.index_head_dim};
}

// The dense MLP slice: gate and up rows of the slice, down's columns.
int64_t DenseBytes(const StepSpec& spec) {
  const model::ModelConfig& c = spec.config;
  const Precision p = spec.quantization.dense_mlp;
  const int64_t slice = DenseSlice(c, spec.shard);
  return MatrixBytes(p, 2 * slice, c.hidden) + MatrixBytes(p, c.hidden, slice);
}

// One token's latent entry as the cache stores it.
int64_t LatentEntryBytes(const StepSpec& spec) {
  const model::ModelConfig& c = spec.config;
  if (spec.kv_cache == KvCacheDtype::kFp8E4M3) {
    return kvfp8::EntryBytes(c.kv_lora_rank, c.qk_rope_dim);
  }
  return kBf16 * (c.kv_lora_rank + c.qk_rope_dim);
}

// Per layer, the sequences the rank decodes (OwnBatch): FP8 keys of every past
// token, latent entries (BF16, or FP8 with scales and a BF16 rope key) of
// min(index_topk, context) kept past tokens (one fewer when the new token is
// among the kept: its entry is computed, not read; the count does not know that
// before running).
void CacheBytes(const StepSpec& spec, StepBytes* bytes) {
  const model::ModelConfig& c = spec.config;
  const int64_t kept_past = std::min(c.index_topk, spec.context);
  const int64_t own = OwnBatch(spec.shard, spec.batch);
  bytes->index_keys += own * spec.context * c.index_head_dim;
  bytes->kv_cache += own * kept_past * LatentEntryBytes(spec);
}

}  // namespace

int64_t StepBytes::Total() const {
  int64_t total = 0;
  for (const auto& [name, value] : Categories()) total += value;
  return total;
}

std::vector<std::pair<std::string, int64_t>> StepBytes::Categories() const {
  return {{"attention", attention},   {"indexer", indexer},
          {"router", router},         {"routed", routed},
          {"shared", shared},         {"dense", dense},
          {"lm_head", lm_head},       {"kv_cache", kv_cache},
          {"index_keys", index_keys}, {"activations", activations}};
}

StepBytes DecodeStepByteBreakdown(const StepSpec& spec,
                                  const std::vector<int>& distinct_experts) {
  const model::ModelConfig& c = spec.config;
  StepBytes bytes;
  size_t moe_index = 0;
  for (int layer = 0; layer < spec.layers; ++layer) {
    bytes.attention += AttentionBytes(spec, layer);
    bytes.indexer += IndexerBytes(spec, layer);
    CacheBytes(spec, &bytes);
    if (!model::IsMoeLayer(c, layer)) {
      bytes.dense += DenseBytes(spec);
      continue;
    }
    bytes.router += kBf16 * c.num_experts * c.hidden;
    const int distinct =
        moe_index < distinct_experts.size() ? distinct_experts[moe_index] : 0;
    ++moe_index;
    bytes.routed += distinct * ExpertSliceBytes(c, spec.shard);
    if (OwnsShared(c, spec.shard)) {
      bytes.shared += ExpertSliceBytes(c, spec.shard);
    }
  }
  const int64_t vocab = VocabSlice(c, spec.shard);
  bytes.lm_head = MatrixBytes(spec.quantization.lm_head, vocab, c.hidden) +
                  kBf16 * c.hidden;
  bytes.activations =
      kBf16 * int64_t{OwnBatch(spec.shard, spec.batch)} * (c.hidden + vocab);
  return bytes;
}

std::vector<int> StandInDistinctExperts(const StepSpec& spec) {
  std::vector<int> distinct;
  for (int layer = 0; layer < spec.layers; ++layer) {
    if (!model::IsMoeLayer(spec.config, layer)) continue;
    const std::vector<float> x = MoeLayerInput(spec, layer);
    std::set<int> owned;
    for (const Route& route : RouteBatch(spec, layer, x.data(), spec.batch)) {
      for (int e : route.experts) {
        if (OwnsExpert(spec.config, spec.shard, e)) owned.insert(e);
      }
    }
    distinct.push_back(static_cast<int>(owned.size()));
  }
  return distinct;
}

}  // namespace moetune::ref
