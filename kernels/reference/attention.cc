#include "kernels/reference/attention.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "kernels/model/near_top_k.h"
#include "kernels/model/weight_gen.h"
#include "kernels/reference/model_weights.h"
#include "kernels/reference/ops.h"

namespace moetune::ref {
namespace {

std::vector<float> Gemv(const StepSpec& spec, int layer, uint32_t tensor,
                        const float* x) {
  const WeightDesc w = ProjectionDesc(spec, layer, tensor);
  std::vector<float> out(static_cast<size_t>(w.rows()));
  Gemv(w, x, out.data());
  return out;
}

struct Query {
  std::vector<float> q_a_normed;  // [q_lora]
  // [local heads][nope | rope], rope part rotated: this rank's heads.
  std::vector<float> q;
};

Query ComputeQuery(const StepSpec& spec, int layer, const float* x_normed) {
  const model::ModelConfig& c = spec.config;
  Query query;
  query.q_a_normed = Gemv(spec, layer, weights::kQA, x_normed);
  const std::vector<float> gamma =
      NormGamma(spec, layer, weights::kQANorm, c.q_lora_rank);
  RmsNorm(query.q_a_normed.data(), gamma.data(), c.q_lora_rank,
          c.latent_norm_eps, query.q_a_normed.data());
  const int head_dim = c.qk_nope_dim + c.qk_rope_dim;
  const int heads = HeadsPerRank(c, spec.shard);
  query.q.resize(static_cast<size_t>(heads) * head_dim);
  Gemv(ProjectionDesc(spec, layer, weights::kQB),
       int64_t{HeadBegin(c, spec.shard)} * head_dim, int64_t{heads} * head_dim,
       0, c.q_lora_rank, query.q_a_normed.data(), query.q.data());
  for (int h = 0; h < heads; ++h) {
    ApplyRope(query.q.data() + h * head_dim + c.qk_nope_dim, c.qk_rope_dim,
              spec.context, c.rope_theta);
  }
  return query;
}

// The new token's [latent | rope key]: RMSNorm on the latent, RoPE on the
// key at position `context`.
std::vector<float> NewLatentEntry(const StepSpec& spec, int layer,
                                  const float* x_normed) {
  const model::ModelConfig& c = spec.config;
  std::vector<float> kv = Gemv(spec, layer, weights::kKVA, x_normed);
  const std::vector<float> gamma =
      NormGamma(spec, layer, weights::kKVANorm, c.kv_lora_rank);
  RmsNorm(kv.data(), gamma.data(), c.kv_lora_rank, c.latent_norm_eps,
          kv.data());
  ApplyRope(kv.data() + c.kv_lora_rank, c.qk_rope_dim, spec.context,
            c.rope_theta);
  return kv;
}

std::vector<float> GatherEntries(const StepSpec& spec, int layer, int sequence,
                                 const std::vector<int>& kept,
                                 const std::vector<float>& new_entry) {
  const int dim = spec.config.kv_lora_rank + spec.config.qk_rope_dim;
  std::vector<float> entries(kept.size() * dim);
  for (size_t i = 0; i < kept.size(); ++i) {
    float* entry = entries.data() + i * dim;
    if (kept[i] == spec.context) {
      std::copy(new_entry.begin(), new_entry.end(), entry);
    } else {
      LatentCacheEntry(spec, layer, sequence, kept[i], entry);
    }
  }
  return entries;
}

// Absorption: q_lat[j] = sum_i q_nope[i] * W_UK[i][j], where W_UK of head h
// is rows [h*(nope+v), h*(nope+v)+nope) of kv_b, so q_nope . (W_UK c) ==
// q_lat . c without expanding the cache.
std::vector<float> AbsorbQuery(const StepSpec& spec, const WeightDesc& kv_b,
                               int head, const float* q_nope) {
  const model::ModelConfig& c = spec.config;
  const int64_t first_row = int64_t{head} * (c.qk_nope_dim + c.v_head_dim);
  std::vector<double> acc(static_cast<size_t>(c.kv_lora_rank), 0.0);
  for (int i = 0; i < c.qk_nope_dim; ++i) {
    for (int j = 0; j < c.kv_lora_rank; ++j) {
      acc[j] += static_cast<double>(q_nope[i]) * kv_b.Weight(first_row + i, j);
    }
  }
  return std::vector<float>(acc.begin(), acc.end());
}

// v[i] = W_UV[i] . out_lat, W_UV of head h = the next v rows of kv_b.
void ExpandValue(const StepSpec& spec, const WeightDesc& kv_b, int head,
                 const float* out_lat, float* v) {
  const model::ModelConfig& c = spec.config;
  const int64_t first_row =
      int64_t{head} * (c.qk_nope_dim + c.v_head_dim) + c.qk_nope_dim;
  for (int i = 0; i < c.v_head_dim; ++i) {
    double sum = 0.0;
    for (int j = 0; j < c.kv_lora_rank; ++j) {
      sum += static_cast<double>(kv_b.Weight(first_row + i, j)) * out_lat[j];
    }
    v[i] = static_cast<float>(sum);
  }
}

}  // namespace

void AbsorbedAttentionHead(const float* q_lat, const float* q_rope,
                           const float* entries, int tokens, int kv_lora,
                           int rope, float scale, float* out_lat) {
  const int dim = kv_lora + rope;
  std::vector<float> p(static_cast<size_t>(tokens));
  for (int t = 0; t < tokens; ++t) {
    const float* entry = entries + static_cast<size_t>(t) * dim;
    const double score =
        Dot(q_lat, entry, kv_lora) + Dot(q_rope, entry + kv_lora, rope);
    p[t] = static_cast<float>(score * scale);
  }
  Softmax(p.data(), tokens);
  std::vector<double> acc(static_cast<size_t>(kv_lora), 0.0);
  for (int t = 0; t < tokens; ++t) {
    const float* entry = entries + static_cast<size_t>(t) * dim;
    for (int j = 0; j < kv_lora; ++j)
      acc[j] += static_cast<double>(p[t]) * entry[j];
  }
  for (int j = 0; j < kv_lora; ++j) out_lat[j] = static_cast<float>(acc[j]);
}

float IndexerScore(const float* q, const float* w, int heads, int dim,
                   const float* k) {
  const double weight_scale = 1.0 / std::sqrt(static_cast<double>(heads));
  const double dot_scale = 1.0 / std::sqrt(static_cast<double>(dim));
  double score = 0.0;
  for (int h = 0; h < heads; ++h) {
    const double dot = Dot(q + static_cast<size_t>(h) * dim, k, dim);
    score += static_cast<double>(w[h]) * weight_scale *
             std::max(dot * dot_scale, 0.0);
  }
  return static_cast<float>(score);
}

std::vector<int> TopKIndices(const std::vector<float>& scores, int k) {
  std::vector<int> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  if (static_cast<int>(order.size()) <= k) return order;
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&scores](int a, int b) {
                      if (scores[a] != scores[b]) return scores[a] > scores[b];
                      return a < b;
                    });
  order.resize(static_cast<size_t>(k));
  std::sort(order.begin(), order.end());
  return order;
}

std::vector<float> IndexerScores(const StepSpec& spec, int layer, int sequence,
                                 const float* x_normed, const float* q_a_normed,
                                 std::vector<float>* new_key) {
  const model::ModelConfig& c = spec.config;
  std::vector<float> q = Gemv(spec, layer, weights::kIndexerQB, q_a_normed);
  for (int h = 0; h < c.index_heads; ++h) {
    ApplyRope(q.data() + static_cast<size_t>(h) * c.index_head_dim,
              c.qk_rope_dim, spec.context, c.rope_theta);
  }
  const std::vector<float> w =
      Gemv(spec, layer, weights::kIndexerWeights, x_normed);
  std::vector<float> key = Gemv(spec, layer, weights::kIndexerK, x_normed);
  const std::vector<float> gamma =
      NormGamma(spec, layer, weights::kIndexerKNorm, c.index_head_dim);
  const std::vector<float> beta =
      NormBias(spec, layer, weights::kIndexerKNormBias, c.index_head_dim);
  LayerNorm(key.data(), gamma.data(), beta.data(), c.index_head_dim,
            c.index_norm_eps, key.data());
  ApplyRope(key.data(), c.qk_rope_dim, spec.context, c.rope_theta);
  std::vector<float> scores(static_cast<size_t>(spec.context) + 1);
  std::vector<float> past(static_cast<size_t>(c.index_head_dim));
  for (int t = 0; t < spec.context; ++t) {
    IndexerKeyCacheEntry(spec, layer, sequence, t, past.data());
    scores[t] = IndexerScore(q.data(), w.data(), c.index_heads,
                             c.index_head_dim, past.data());
  }
  scores[spec.context] = IndexerScore(q.data(), w.data(), c.index_heads,
                                      c.index_head_dim, key.data());
  if (new_key != nullptr) *new_key = std::move(key);
  return scores;
}

std::vector<int> IndexerKeep(const StepSpec& spec, int layer, int sequence,
                             const float* x_normed, const float* q_a_normed) {
  return TopKIndices(IndexerScores(spec, layer, sequence, x_normed, q_a_normed),
                     spec.config.index_topk);
}

namespace {

// The set attended to: forced, or the proposal where it is near the
// indexer's own top k (AttentionTrace), or the indexer's own; ascending.
std::vector<int> ChooseKept(const std::vector<float>& scores, int k,
                            const AttentionTrace* trace) {
  if (trace != nullptr && trace->forced_kept != nullptr) {
    return *trace->forced_kept;
  }
  std::vector<int> own = TopKIndices(scores, k);
  if (trace == nullptr || trace->proposed_kept == nullptr ||
      trace->proposed_kept->size() != own.size() || own.empty()) {
    return own;
  }
  float kth = scores[own.front()], largest = 0.0f;
  for (const int i : own) kth = std::min(kth, scores[i]);
  for (const float v : scores) largest = std::max(largest, std::fabs(v));
  const std::vector<int>& proposed = *trace->proposed_kept;
  if (!route::IsNearTopK(scores.data(), static_cast<int>(scores.size()),
                         proposed.data(), static_cast<int>(proposed.size()),
                         kth, trace->kept_tolerance * largest)) {
    return own;
  }
  std::vector<int> kept = proposed;
  std::sort(kept.begin(), kept.end());
  return kept;
}

}  // namespace

void MlaAttention(const StepSpec& spec, int layer, int sequence,
                  const float* x_normed, float* out, AttentionTrace* trace) {
  const model::ModelConfig& c = spec.config;
  const Query query = ComputeQuery(spec, layer, x_normed);
  std::vector<float> new_key;
  std::vector<float> scores = IndexerScores(spec, layer, sequence, x_normed,
                                            query.q_a_normed.data(), &new_key);
  const std::vector<int> kept = ChooseKept(scores, c.index_topk, trace);
  const std::vector<float> new_latent = NewLatentEntry(spec, layer, x_normed);
  if (trace != nullptr) {
    trace->scores = std::move(scores);
    trace->kept = kept;
    trace->new_latent = new_latent;
    trace->new_key = std::move(new_key);
  }
  const std::vector<float> entries =
      GatherEntries(spec, layer, sequence, kept, new_latent);
  const WeightDesc kv_b = ProjectionDesc(spec, layer, weights::kKVB);
  const int head_dim = c.qk_nope_dim + c.qk_rope_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int heads = HeadsPerRank(c, spec.shard);
  const int first = HeadBegin(c, spec.shard);
  std::vector<float> out_lat(static_cast<size_t>(c.kv_lora_rank));
  std::vector<float> values(static_cast<size_t>(heads) * c.v_head_dim);
  for (int i = 0; i < heads; ++i) {
    const float* q_head = query.q.data() + static_cast<size_t>(i) * head_dim;
    const std::vector<float> q_lat = AbsorbQuery(spec, kv_b, first + i, q_head);
    AbsorbedAttentionHead(q_lat.data(), q_head + c.qk_nope_dim, entries.data(),
                          static_cast<int>(kept.size()), c.kv_lora_rank,
                          c.qk_rope_dim, scale, out_lat.data());
    ExpandValue(spec, kv_b, first + i, out_lat.data(),
                values.data() + static_cast<size_t>(i) * c.v_head_dim);
  }
  // o_proj's columns of this rank's heads: its partial sum.
  Gemv(ProjectionDesc(spec, layer, weights::kO), 0, c.hidden,
       int64_t{first} * c.v_head_dim, int64_t{heads} * c.v_head_dim,
       values.data(), out);
}

}  // namespace moetune::ref
