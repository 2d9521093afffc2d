#include "kernels/reference/attention.h"

#include <algorithm>
#include <cmath>

#include "gtest/gtest.h"
#include "kernels/model/nvfp4_format.h"
#include "kernels/model/weight_gen.h"
#include "kernels/reference/model_weights.h"
#include "kernels/reference/moe_reference.h"
#include "kernels/reference/ops.h"
#include "tests/kernels/reference/step_spec_util.h"

namespace moetune::ref {
namespace {

StepSpec TinySpec(int context) {
  StepSpec spec = testing::PresetSpec("tiny", 3);
  spec.context = context;
  return spec;
}

std::vector<float> Gemv(const StepSpec& spec, int layer, uint32_t tensor,
                        const float* x) {
  const Bf16TensorDesc d = Bf16Desc(spec, layer, tensor);
  std::vector<float> y(static_cast<size_t>(d.rows));
  GemvBf16(d, x, y.data());
  return y;
}

// 1 head, latent 2, rope 2, 2 cached tokens, scale 0.5:
//   t0: c = (1, 2), k_rope = (0, 1);  t1: c = (3, -1), k_rope = (2, 0)
//   q_lat = (1, 1), q_rope = (1, 0)
//   scores: (3 + 0) * .5 = 1.5 and (2 + 2) * .5 = 2
//   p = (1 / (1 + e^.5), e^.5 / (1 + e^.5)) = (.377541, .622459)
//   out = .377541 (1, 2) + .622459 (3, -1) = (2.244919, .132622)
TEST(AttentionTest, OneHeadTwoTokensByHand) {
  const float entries[8] = {1, 2, 0, 1, 3, -1, 2, 0};
  const float q_lat[2] = {1, 1};
  const float q_rope[2] = {1, 0};
  float out[2];
  AbsorbedAttentionHead(q_lat, q_rope, entries, 2, 2, 2, 0.5f, out);
  EXPECT_NEAR(out[0], 2.24491866f, 1e-6);
  EXPECT_NEAR(out[1], 0.13262201f, 1e-6);
}

// Two heads of dim 2: the weights scale by 1/sqrt(2), the dots by 1/sqrt(2).
TEST(AttentionTest, IndexerScoreByHand) {
  const float q[4] = {1, 0, 0, 1};  // head 0 = (1, 0), head 1 = (0, 1)
  const float w[2] = {2, 3};
  const float k1[2] = {1, -2};  // dots 1 and -2 (ReLU -> 0): 2 * 1 / 2
  EXPECT_FLOAT_EQ(IndexerScore(q, w, 2, 2, k1), 1.0f);
  const float k2[2] = {0.5f, 0.5f};  // (2 * .5 + 3 * .5) / 2
  EXPECT_FLOAT_EQ(IndexerScore(q, w, 2, 2, k2), 1.25f);
  const float w_signed[2] = {-2, 3};  // weights of either sign
  EXPECT_FLOAT_EQ(IndexerScore(q, w_signed, 2, 2, k2), 0.25f);
  const float k0[2] = {-1, -1};  // every ReLU zero: exactly 0, a tie
  EXPECT_EQ(IndexerScore(q, w, 2, 2, k0), 0.0f);
}

TEST(AttentionTest, TopKKeepsBestAscendingWithLowerIndexOnTies) {
  EXPECT_EQ(TopKIndices({0.1f, 0.5f, 0.5f, 0.3f, 0.9f}, 3),
            (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(TopKIndices({0.5f, 0.5f, 0.5f}, 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(TopKIndices({0.2f, 0.1f}, 16), (std::vector<int>{0, 1}));
}

// The new token's query, computed step by step from the public pieces.
struct TestQuery {
  std::vector<float> q_a_normed, q;
};
TestQuery QueryOf(const StepSpec& spec, int layer, const float* x) {
  const model::ModelConfig& c = spec.config;
  TestQuery tq;
  tq.q_a_normed = Gemv(spec, layer, weights::kQA, x);
  const auto gamma = NormGamma(spec, layer, weights::kQANorm, c.q_lora_rank);
  RmsNorm(tq.q_a_normed.data(), gamma.data(), c.q_lora_rank, c.latent_norm_eps,
          tq.q_a_normed.data());
  tq.q = Gemv(spec, layer, weights::kQB, tq.q_a_normed.data());
  for (int h = 0; h < c.num_heads; ++h) {
    ApplyRope(tq.q.data() + h * 48 + 32, 16, spec.context, c.rope_theta);
  }
  return tq;
}

// Every token's entry [latent | rope key], the new one last.
std::vector<std::vector<float>> EntriesOf(const StepSpec& spec, int layer,
                                          const float* x) {
  const model::ModelConfig& c = spec.config;
  std::vector<std::vector<float>> entries;
  for (int t = 0; t < spec.context; ++t) {
    entries.emplace_back(80);
    LatentCacheEntry(spec, layer, 0, t, entries.back().data());
  }
  std::vector<float> kv = Gemv(spec, layer, weights::kKVA, x);
  const auto gamma = NormGamma(spec, layer, weights::kKVANorm, 64);
  RmsNorm(kv.data(), gamma.data(), 64, c.latent_norm_eps, kv.data());
  ApplyRope(kv.data() + 64, 16, spec.context, c.rope_theta);
  entries.push_back(kv);
  return entries;
}

// Attention WITHOUT absorption: expand every cached latent into per-head
// keys (W_UK c) and values (W_UV c), as training-time MLA does. The
// absorbed reference must give the same output.
// Head h of tiny (nope 32, rope 16, v 32, latent 64) WITHOUT absorption:
// every entry's latent is expanded into a key W_UK c and a value W_UV c.
void ExpandedHead(const Bf16TensorDesc& kv_b, int h, const float* q,
                  const std::vector<std::vector<float>>& entries, float* out) {
  std::vector<float> scores;
  std::vector<std::vector<double>> values;
  for (const auto& e : entries) {
    double score = 0.0;
    values.emplace_back(32, 0.0);
    for (int i = 0; i < 32; ++i) {
      double k_nope = 0.0;
      for (int j = 0; j < 64; ++j) {
        k_nope += double{kv_b.Weight(h * 64 + i, j)} * e[j];
        values.back()[i] += double{kv_b.Weight(h * 64 + 32 + i, j)} * e[j];
      }
      score += q[i] * k_nope;
    }
    for (int i = 0; i < 16; ++i) score += double{q[32 + i]} * e[64 + i];
    scores.push_back(static_cast<float>(score / std::sqrt(48.0)));
  }
  Softmax(scores.data(), static_cast<int>(scores.size()));
  for (size_t t = 0; t < entries.size(); ++t) {
    for (int i = 0; i < 32; ++i) out[i] += scores[t] * values[t][i];
  }
}

// Training-time (expanded) MLA and the absorbed reference give the same
// output.
TEST(AttentionTest, AbsorbedEqualsExpandedMla) {
  const StepSpec spec = TinySpec(5);  // 6 tokens <= index_topk: all kept
  const int layer = 0;
  const std::vector<float> x = MoeLayerInput(spec, layer);
  const TestQuery tq = QueryOf(spec, layer, x.data());
  const auto entries = EntriesOf(spec, layer, x.data());
  ASSERT_EQ(IndexerKeep(spec, layer, 0, x.data(), tq.q_a_normed.data()).size(),
            6u);
  const Bf16TensorDesc kv_b = Bf16Desc(spec, layer, weights::kKVB);
  std::vector<float> heads_out(4 * 32, 0.0f);
  for (int h = 0; h < 4; ++h) {
    ExpandedHead(kv_b, h, tq.q.data() + h * 48, entries,
                 heads_out.data() + h * 32);
  }
  const std::vector<float> expected =
      Gemv(spec, layer, weights::kO, heads_out.data());
  std::vector<float> out(256);
  MlaAttention(spec, layer, 0, x.data(), out.data());
  double max_err = 0.0, max_ref = 0.0;
  for (int i = 0; i < 256; ++i) {
    max_err = std::max(max_err, std::fabs(double{out[i]} - expected[i]));
    max_ref = std::max(max_ref, std::fabs(double{expected[i]}));
  }
  EXPECT_GT(max_ref, 1e-3);
  EXPECT_LT(max_err / max_ref, 1e-5);
}

// With more tokens than index_topk, the kept ones are exactly the best DSA
// scores, recomputed here from the public pieces.
TEST(AttentionTest, IndexerKeepsTheTopScoringTokens) {
  const StepSpec spec = TinySpec(40);
  const int layer = 2;
  const std::vector<float> x = MoeLayerInput(spec, layer);
  const TestQuery tq = QueryOf(spec, layer, x.data());
  const std::vector<int> kept =
      IndexerKeep(spec, layer, 0, x.data(), tq.q_a_normed.data());
  ASSERT_EQ(kept.size(), 16u);
  ASSERT_TRUE(std::is_sorted(kept.begin(), kept.end()));
  const model::ModelConfig& c = spec.config;
  auto q = Gemv(spec, layer, weights::kIndexerQB, tq.q_a_normed.data());
  for (int h = 0; h < 4; ++h) {  // each head's first 16 dims rotated
    ApplyRope(q.data() + h * 32, 16, spec.context, c.rope_theta);
  }
  const auto w = Gemv(spec, layer, weights::kIndexerWeights, x.data());
  auto key = Gemv(spec, layer, weights::kIndexerK, x.data());
  const auto gamma = NormGamma(spec, layer, weights::kIndexerKNorm, 32);
  const auto beta = NormBias(spec, layer, weights::kIndexerKNormBias, 32);
  LayerNorm(key.data(), gamma.data(), beta.data(), 32, c.index_norm_eps,
            key.data());
  ApplyRope(key.data(), 16, spec.context, c.rope_theta);
  std::vector<float> scores;
  std::vector<float> past(32);
  for (int t = 0; t < 40; ++t) {
    IndexerKeyCacheEntry(spec, layer, 0, t, past.data());
    scores.push_back(IndexerScore(q.data(), w.data(), 4, 32, past.data()));
  }
  scores.push_back(IndexerScore(q.data(), w.data(), 4, 32, key.data()));
  float worst_kept = INFINITY, best_dropped = -INFINITY;
  for (int t = 0; t <= 40; ++t) {
    const bool is_kept = std::binary_search(kept.begin(), kept.end(), t);
    if (is_kept) worst_kept = std::min(worst_kept, scores[t]);
    if (!is_kept) best_dropped = std::max(best_dropped, scores[t]);
  }
  EXPECT_GE(worst_kept, best_dropped);
  EXPECT_GT(best_dropped, -INFINITY);
}

TEST(AttentionTest, EachSequenceHasItsOwnCache) {
  const StepSpec spec = TinySpec(3);
  float a[80], b[80];
  LatentCacheEntry(spec, 1, 0, 2, a);
  LatentCacheEntry(spec, 1, 1, 2, b);
  EXPECT_NE(std::vector<float>(a, a + 80), std::vector<float>(b, b + 80));
  // Latent part has unit mean square (already normed); rope part in [-1, 1).
  double mean_square = 0.0;
  for (int t = 0; t < 64; ++t) {
    LatentCacheEntry(spec, 1, 0, t, a);
    for (int d = 0; d < 64; ++d) mean_square += double{a[d]} * a[d];
    for (int d = 64; d < 80; ++d) EXPECT_LE(std::fabs(a[d]), 1.0f);
  }
  EXPECT_NEAR(mean_square / (64 * 64), 1.0, 0.1);
}

// The caches hold exactly what their formats can: BF16 latent entries, FP8
// E4M3 indexer keys (the GPU stores them so and reads the same numbers).
TEST(AttentionTest, CacheValuesAreExactInTheirFormats) {
  const StepSpec spec = TinySpec(3);
  float latent[80], key[32];
  double key_square = 0.0;
  for (int t = 0; t < 64; ++t) {
    LatentCacheEntry(spec, 2, 1, t, latent);
    for (float v : latent) EXPECT_EQ(weights::RoundBf16(v), v);
    IndexerKeyCacheEntry(spec, 2, 1, t, key);
    for (float v : key) {
      EXPECT_EQ(nvfp4::E4M3ToFloat(nvfp4::FloatToE4M3(v)), v);
      key_square += double{v} * v;
    }
  }
  EXPECT_NEAR(key_square / (64 * 32), 1.0, 0.1);
}

// Splitting the heads over ranks splits o_proj's sum: the ranks' partial
// outputs add up to the unsharded block's.
TEST(AttentionTest, RanksPartialOutputsAddUpToTheWholeBlock) {
  StepSpec spec = TinySpec(40);
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = std::sin(0.37f * i);
  std::vector<float> whole(256), sum(256, 0.0f), part(256);
  MlaAttention(spec, 1, 0, x.data(), whole.data());
  for (int rank = 0; rank < 4; ++rank) {
    spec.shard = {2, 2, rank};  // world 4: one head a rank
    MlaAttention(spec, 1, 0, x.data(), part.data());
    for (int i = 0; i < 256; ++i) sum[i] += part[i];
  }
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(sum[i], whole[i], 1e-4) << i;
}

}  // namespace
}  // namespace moetune::ref
