#include "kernels/reference/decode_step.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/model/nvfp4_format.h"
#include "kernels/reference/moe_reference.h"
#include "kernels/reference/ops.h"
#include "kernels/reference/router.h"
#include "kernels/reference/step_bytes.h"
#include "tests/kernels/reference/kept_tie.h"
#include "tests/kernels/reference/step_spec_util.h"

namespace moetune::ref {
namespace {

// 40 past tokens > index_topk 16, so the indexer really drops tokens.
StepSpec TinySpec(int batch, int context = 40) {
  StepSpec spec = testing::PresetSpec("tiny", 21);
  spec.batch = batch;
  spec.context = context;
  return spec;
}

TEST(DecodeStepTest, TinyIsDeterministicAndFinite) {
  const StepSpec spec = TinySpec(3);
  absl::StatusOr<std::vector<float>> a = DecodeStep(spec, nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 3u * 512u);
  absl::StatusOr<std::vector<float>> b = DecodeStep(spec, nullptr);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
  double mean_square = 0.0;
  for (float v : *a) {
    ASSERT_TRUE(std::isfinite(v));
    mean_square += double{v} * v;
  }
  // Unit-rms final hidden times a 1/sqrt(hidden)-scaled lm_head: ~1/3.
  EXPECT_GT(mean_square / a->size(), 0.05);
  EXPECT_LT(mean_square / a->size(), 2.0);
  StepSpec other_seed = spec;
  other_seed.seed = 22;
  EXPECT_NE(*a, *DecodeStep(other_seed, nullptr));
}

// Each sequence has its own token and KV cache: row b of a batch-3 step
// is that sequence decoded alone.
TEST(DecodeStepTest, BatchRowsAreIndependent) {
  const StepSpec spec = TinySpec(3);
  const std::vector<float> batch = *DecodeStep(spec, nullptr);
  const StepSpec single = TinySpec(1);
  for (int b = 0; b < 3; ++b) {
    absl::StatusOr<std::vector<float>> alone =
        DecodeSequences(single, b, nullptr);
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_EQ(*alone, std::vector<float>(batch.begin() + b * 512,
                                         batch.begin() + (b + 1) * 512))
        << "row " << b;
  }
  EXPECT_NE(std::vector<float>(batch.begin(), batch.begin() + 512),
            std::vector<float>(batch.begin() + 512, batch.begin() + 1024));
}

TEST(DecodeStepTest, MoeFnIsCalledForEachMoeLayer) {
  const StepSpec spec = TinySpec(2, 4);
  std::vector<int> layers_seen;
  const MoeFn reference_moe = [&](int layer, const float* x, int batch,
                                  float* y) {
    layers_seen.push_back(layer);
    EXPECT_EQ(batch, 2);
    MoeLayerReference(spec, layer, x, batch, y);
    return absl::OkStatus();
  };
  const std::vector<float> with_fn = *DecodeStep(spec, reference_moe);
  EXPECT_EQ(layers_seen, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(with_fn, *DecodeStep(spec, nullptr));
  const MoeFn zero_moe = [](int, const float*, int batch, float* y) {
    std::fill_n(y, batch * 256, 0.0f);
    return absl::OkStatus();
  };
  EXPECT_NE(with_fn, *DecodeStep(spec, zero_moe));
  const MoeFn failing = [](int, const float*, int, float*) {
    return absl::InternalError("backend exploded");
  };
  EXPECT_EQ(DecodeStep(spec, failing).status().message(), "backend exploded");
}

// The reference's own expert choices of every MoE layer of a step, as the
// BF16-input reference makes them.
ProposedRoutes OwnRoutes(const StepSpec& spec) {
  ProposedRoutes routes;
  const MoeFn record = [&](int layer, const float* x, int batch, float* y) {
    std::vector<float> rounded(
        x, x + static_cast<size_t>(batch) * spec.config.hidden);
    for (float& v : rounded) v = RoundToBf16(v);
    if (static_cast<int>(routes.size()) <= layer) routes.resize(layer + 1);
    for (const Route& r : RouteBatch(spec, layer, rounded.data(), batch)) {
      routes[layer].insert(routes[layer].end(), r.experts.begin(),
                           r.experts.end());
    }
    MoeLayerReference(spec, layer, rounded.data(), batch, y);
    return absl::OkStatus();
  };
  EXPECT_TRUE(DecodeStep(spec, record).ok());
  return routes;
}

// Proposed routes are followed where they are near the reference's own
// top-k: its own choices change nothing; a token's last expert swapped for
// an unchosen one changes that sequence's logits alone, and only
// within the tolerance; a proposal of the wrong size is refused.
TEST(DecodeStepTest, ProposedRoutesAreFollowedNearATie) {
  const StepSpec spec = TinySpec(3);
  const std::vector<float> plain =
      *DecodeStep(spec, Bf16InputReferenceMoe(spec));
  const ProposedRoutes own = OwnRoutes(spec);
  ASSERT_EQ(own.size(), 4u);
  EXPECT_EQ(*DecodeStep(spec, Bf16InputReferenceMoe(spec, &own, 1.0f)), plain);
  // Sequence 1's last expert in the first MoE layer swapped for one it did
  // not choose (a tolerance of 1.0 takes any).
  ProposedRoutes swapped = own;
  const int k = spec.config.experts_per_token;
  std::vector<int> chosen(own[1].begin() + k, own[1].begin() + 2 * k);
  int other = 0;
  while (std::count(chosen.begin(), chosen.end(), other) > 0) ++other;
  swapped[1][2 * k - 1] = other;
  const std::vector<float> followed =
      *DecodeStep(spec, Bf16InputReferenceMoe(spec, &swapped, 1.0f));
  for (int b = 0; b < 3; ++b) {
    const bool same =
        std::equal(followed.begin() + b * 512, followed.begin() + (b + 1) * 512,
                   plain.begin() + b * 512);
    EXPECT_EQ(same, b != 1) << "sequence " << b;
  }
  EXPECT_EQ(*DecodeStep(spec, Bf16InputReferenceMoe(spec, &swapped, 0.0f)),
            plain);  // no tie: its own choice
  ProposedRoutes short_routes = own;
  short_routes[2].pop_back();
  const absl::StatusOr<std::vector<float>> refused =
      DecodeStep(spec, Bf16InputReferenceMoe(spec, &short_routes, 1.0f));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("proposed routes of layer 2"));
}

// A run's routes listed flat over the MoE layers become each MoE layer's
// proposal (the dense layer's empty); any other size is refused.
TEST(DecodeStepTest, MoeLayerRoutesSplitsARunsListByLayer) {
  const StepSpec spec = TinySpec(3);
  const ProposedRoutes own = OwnRoutes(spec);
  std::vector<int> flat;
  for (const std::vector<int>& layer : own) {
    flat.insert(flat.end(), layer.begin(), layer.end());
  }
  const absl::StatusOr<ProposedRoutes> split = MoeLayerRoutes(spec, flat);
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->size(), 4u);
  EXPECT_TRUE((*split)[0].empty());  // tiny's dense layer
  EXPECT_EQ(*split, own);
  flat.push_back(0);
  EXPECT_THAT(std::string(MoeLayerRoutes(spec, flat).status().message()),
              ::testing::HasSubstr("73 expert choices; 3 MoE layers of 3 "
                                   "tokens choosing 8 experts each make 72"));
}

// Proposed kept sets are followed where they are near the indexer's own
// top k: its own sets change nothing; a sequence's lowest kept token
// swapped for an unkept one that ties it (tiny's scores tie at zero where
// ReLU removes every head's term) changes that sequence's logits alone; a
// swap for a token far below changes nothing. Flat lists split by layer.
TEST(DecodeStepTest, ProposedKeptSetsAreFollowedNearATie) {
  StepSpec spec = TinySpec(7, 256);
  spec.layers = 1;
  spec.quantization.attention = Precision::kNvfp4;
  StepTrace traced;
  const std::vector<float> plain = *DecodeStepTraced(spec, &traced);
  const LayerTrace& t = traced.layers[0];
  const ProposedKept own = {t.kept};
  const float tol = kCarriedBf16KeptTolerance;
  EXPECT_EQ(*DecodeStepFollowingKept(spec, nullptr, own, tol), plain);
  const testing::KeptTie tie = testing::FindKeptTie(t, tol);
  ASSERT_GE(tie.sequence, 0) << "no sequence with a tie at its k-th kept token";
  const int seq = tie.sequence;
  ProposedKept swapped = own;
  swapped[0][seq] = testing::SwappedKept(t, seq, tie.tie);
  const std::vector<float> followed =
      *DecodeStepFollowingKept(spec, nullptr, swapped, tol);
  for (int b = 0; b < spec.batch; ++b) {
    const bool same =
        std::equal(followed.begin() + b * 512, followed.begin() + (b + 1) * 512,
                   plain.begin() + b * 512);
    EXPECT_EQ(same, b != seq) << "sequence " << b;
  }
  swapped[0][seq] = testing::SwappedKept(t, seq, tie.far);
  EXPECT_EQ(*DecodeStepFollowingKept(spec, nullptr, swapped, tol), plain);
  std::vector<int> flat, counts;
  for (const std::vector<int>& kept : t.kept) {
    flat.insert(flat.end(), kept.begin(), kept.end());
    flat.resize(flat.size() + spec.config.index_topk - kept.size(), -1);
    counts.push_back(static_cast<int>(kept.size()));
  }
  EXPECT_EQ(*LayerKeptSets(spec, flat, counts), own);
  counts.pop_back();
  EXPECT_THAT(
      std::string(LayerKeptSets(spec, flat, counts).status().message()),
      ::testing::HasSubstr("112 tokens and 6 counts; 1 layers of 7 "
                           "sequences keeping up to 16 make 112 and 7"));
}

TEST(DecodeStepTest, LayersLimitsTheLayersRun) {
  StepSpec spec = TinySpec(1, 4);
  spec.layers = 1;  // only the dense layer: the MoE is never called
  const MoeFn must_not_run = [](int, const float*, int, float*) {
    return absl::InternalError("MoE called");
  };
  EXPECT_TRUE(DecodeStep(spec, must_not_run).ok());
  spec.layers = 2;
  EXPECT_FALSE(DecodeStep(spec, must_not_run).ok());
}

// The trace records what each layer computed, the same logits as an
// untraced step; forcing a layer's kept set changes what it attends to.
TEST(DecodeStepTest, TraceRecordsEachLayerAndFollowsForcedKeptSets) {
  const StepSpec spec = TinySpec(2);
  StepTrace trace;
  absl::StatusOr<std::vector<float>> traced = DecodeStepTraced(spec, &trace);
  ASSERT_TRUE(traced.ok()) << traced.status();
  EXPECT_EQ(*traced, *DecodeStep(spec, nullptr));
  ASSERT_EQ(trace.layers.size(), 4u);
  for (const LayerTrace& layer : trace.layers) {
    EXPECT_EQ(layer.hidden.size(), 2u * 256u);
    EXPECT_EQ(layer.mlp_out.size(), 2u * 256u);
    ASSERT_EQ(layer.kept.size(), 2u);
    EXPECT_EQ(layer.kept[0].size(), 16u);  // index_topk of 41 tokens
    EXPECT_EQ(layer.index_scores[0].size(), 41u);
  }
  StepTrace forced;
  forced.forced_kept = {{{0, 1, 2}, {}}};  // layer 0, sequence 0 only
  absl::StatusOr<std::vector<float>> other = DecodeStepTraced(spec, &forced);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(forced.layers[0].kept[0], (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(forced.layers[0].kept[1], trace.layers[0].kept[1]);
  EXPECT_NE(forced.layers[0].hidden, trace.layers[0].hidden);
}

TEST(DecodeStepTest, BadSpecsNameTheField) {
  StepSpec spec = TinySpec(1);
  spec.layers = 0;
  EXPECT_NE(DecodeStep(spec, nullptr).status().message().find("step.layers"),
            std::string::npos);
  spec = TinySpec(0);
  EXPECT_EQ(DecodeStep(spec, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_NE(DecodeStep(spec, nullptr).status().message().find("step.batch"),
            std::string::npos);
  spec = TinySpec(1, -1);
  EXPECT_NE(DecodeStep(spec, nullptr).status().message().find("step.context"),
            std::string::npos);
  spec = TinySpec(1);
  spec.routing.kind = RoutingSpec::Kind::kReplayed;
  spec.routing.histogram = {1.0, 2.0};
  EXPECT_NE(
      DecodeStep(spec, nullptr).status().message().find("routing.histogram"),
      std::string::npos);
  spec = TinySpec(1);
  EXPECT_EQ(DecodeSequences(spec, -1, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// tiny, one (dense) layer, batch 1, no context, the trivial shard:
//   attention: q_a 128x256 + kv_a 80x256 + q_b 192x128 + kv_b 256x64 +
//   o 256x128 = 126976, gammas 256 + 128 + 64 + 256 = 704 -> 255360 bytes;
//   indexer: idx_q 128x128 + idx_k 32x256 + idx_w 4x256 = 25600, key norm
//   gamma and bias 64 -> 51328;
//   dense NVFP4: gate_up 1024x256 -> 131072 + 16384, down 256x512 ->
//   65536 + 8192 = 221184; lm_head 512x256 and the final norm 256 ->
//   262656; embedding row 256 and logits 512 -> 1536 (all BF16).
TEST(DecodeStepTest, BytesByHand) {
  StepSpec spec = TinySpec(1, 0);
  spec.layers = 1;
  StepBytes bytes = DecodeStepByteBreakdown(spec, {});
  EXPECT_EQ(bytes.attention, 255360);
  EXPECT_EQ(bytes.indexer, 51328);
  EXPECT_EQ(bytes.dense, 221184);
  EXPECT_EQ(bytes.lm_head, 262656);
  EXPECT_EQ(bytes.activations, 1536);
  EXPECT_EQ(bytes.kv_cache + bytes.index_keys + bytes.router + bytes.routed +
                bytes.shared,
            0);
  EXPECT_EQ(DecodeStepBytes(spec), 255360 + 51328 + 221184 + 262656 + 1536);
  // 40 past tokens, batch 2: FP8 keys 2 * 40 * 32, BF16 latent entries of
  // 16 kept tokens 2 * 16 * 80 * 2; two embedding rows and logits rows.
  spec = TinySpec(2, 40);
  spec.layers = 1;
  bytes = DecodeStepByteBreakdown(spec, {});
  EXPECT_EQ(bytes.index_keys, 2560);
  EXPECT_EQ(bytes.kv_cache, 5120);
  EXPECT_EQ(bytes.activations, 3072);
  // An MoE layer adds its router and the distinct experts' slices.
  spec.layers = 2;
  bytes = DecodeStepByteBreakdown(spec, {5});
  EXPECT_EQ(bytes.router, 2 * 32 * 256);
  EXPECT_EQ(bytes.routed, 5 * ExpertSliceBytes(spec.config, spec.shard));
  EXPECT_EQ(bytes.shared, ExpertSliceBytes(spec.config, spec.shard));
  EXPECT_EQ(bytes.attention, 2 * 255360);
  EXPECT_EQ(bytes.index_keys, 2 * 2560);
  EXPECT_EQ(
      DecodeStepBytes(spec),
      DecodeStepByteBreakdown(spec, StandInDistinctExperts(spec)).Total());
}

// Rank 1 of world 2 (tp 2): half the heads (q_b, kv_b rows, o_proj columns),
// half the dense MLP and half the vocabulary; latents and the indexer whole.
TEST(DecodeStepTest, ShardedBytesByHand) {
  StepSpec spec = TinySpec(1, 0);
  spec.layers = 1;
  spec.shard = {2, 1, 1};
  const StepBytes bytes = DecodeStepByteBreakdown(spec, {});
  EXPECT_EQ(bytes.attention,
            2 * (32768 + 20480 + (24576 + 16384 + 32768) / 2 + 704));
  EXPECT_EQ(bytes.indexer, 51328);
  EXPECT_EQ(bytes.dense, 221184 / 2);
  EXPECT_EQ(bytes.lm_head, 2 * (256 * 256 + 256));
  EXPECT_EQ(bytes.activations, 2 * (256 + 256));
}

TEST(DecodeStepTest, AShardTheStepCannotSplitIsRefused) {
  StepSpec spec = TinySpec(1);
  spec.shard = {8, 1, 0};  // 8 ranks, 4 heads
  const auto logits = DecodeStep(spec, nullptr);
  EXPECT_EQ(logits.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(logits.status().message().find("does not divide"),
            std::string::npos);
}

// The ranks' logits are slices of the vocabulary: rank r's are columns
// [r * 256, (r + 1) * 256) of what it computes.
TEST(DecodeStepTest, AShardedStepGivesItsVocabularySlice) {
  StepSpec spec = TinySpec(2, 8);
  spec.layers = 1;
  spec.shard = {2, 1, 0};
  const auto logits = DecodeStep(spec, nullptr);
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->size(), 2u * 256);
}

// Data-parallel attention: rank r of tp 1 x ep 2 decodes sequences 2r and
// 2r + 1 of a batch of 4 with attention, the dense MLP and lm_head whole.
// Given the whole MoE layer (what the reduce-scatter hands it), its logits
// are the world-1 step's rows of those sequences, bit for bit; with its own
// experts' partial sums (no peers) they are not.
TEST(DecodeStepTest, DataParallelRanksDecodeTheirOwnSequencesWhole) {
  const StepSpec whole = TinySpec(4, 8);
  const std::vector<float> all = *DecodeStep(whole, nullptr);
  const MoeFn combined = [&whole](int layer, const float* x, int batch,
                                  float* y) {
    MoeLayerReference(whole, layer, x, batch, y);
    return absl::OkStatus();
  };
  const size_t vocab = whole.config.vocab;
  for (int rank = 0; rank < 2; ++rank) {
    StepSpec dp = whole;
    dp.shard = {1, 2, rank, true};
    const auto logits = DecodeStep(dp, combined);
    ASSERT_TRUE(logits.ok()) << logits.status();
    EXPECT_EQ(*logits, std::vector<float>(all.begin() + rank * 2 * vocab,
                                          all.begin() + (rank + 1) * 2 * vocab))
        << "rank " << rank;
    const auto partial = DecodeStep(dp, nullptr);
    ASSERT_TRUE(partial.ok()) << partial.status();
    EXPECT_EQ(partial->size(), 2 * vocab);
    EXPECT_NE(*partial, *logits);
  }
}

TEST(DecodeStepTest, DataParallelBatchMustSplitEvenly) {
  StepSpec spec = TinySpec(3, 8);
  spec.shard = {1, 2, 0, true};
  const auto logits = DecodeStep(spec, nullptr);
  EXPECT_EQ(logits.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(logits.status().message().find("step.batch"), std::string::npos)
      << logits.status();
}

// A data-parallel rank reads the whole attention, dense MLP and lm_head,
// and the caches of its own sequences only.
TEST(DecodeStepTest, DataParallelBytesAreWholeWeightsAndOwnCaches) {
  StepSpec one = TinySpec(2, 40);
  one.layers = 2;
  StepSpec dp = TinySpec(4, 40);
  dp.layers = 2;
  dp.shard = {1, 2, 1, true};
  const StepBytes a = DecodeStepByteBreakdown(one, {});
  const StepBytes b = DecodeStepByteBreakdown(dp, {});
  EXPECT_EQ(b.attention, a.attention);
  EXPECT_EQ(b.indexer, a.indexer);
  EXPECT_EQ(b.dense, a.dense);
  EXPECT_EQ(b.lm_head, a.lm_head);
  EXPECT_EQ(b.kv_cache, a.kv_cache);
  EXPECT_EQ(b.index_keys, a.index_keys);
  EXPECT_EQ(b.activations, a.activations);
}

// Several steps in a row: the first is the plain step; each later one
// decodes the tokens the one before chose, over caches that hold the
// tokens before it in their formats.
TEST(DecodeStepsTest, FirstStepIsDecodeStepAndLaterOnesDecodeTheirTokens) {
  const StepSpec spec = TinySpec(2, 10);  // 10 + 3 <= index_topk: all kept
  const auto steps = DecodeSteps(spec, 3, nullptr);
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_EQ(steps->size(), 3u);
  const auto first = DecodeStep(spec, nullptr);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*steps)[0], *first);
  EXPECT_NE((*steps)[1], (*steps)[0]);
  // Step 1 by hand: the context one longer, step 0's tokens as input, its
  // entries appended in the caches' formats.
  StepTrace trace;
  ASSERT_TRUE(DecodeStepTraced(spec, &trace).ok());
  Generated g;
  g.prefilled = spec.context;
  g.latent.resize(spec.layers);
  g.keys.resize(spec.layers);
  const int vocab = spec.config.vocab;
  for (int b = 0; b < spec.batch; ++b) {
    const float* row = first->data() + static_cast<size_t>(b) * vocab;
    g.tokens.push_back(
        static_cast<int>(std::max_element(row, row + vocab) - row));
  }
  for (int layer = 0; layer < spec.layers; ++layer) {
    for (int b = 0; b < spec.batch; ++b) {
      std::vector<float> latent, key;
      for (float v : trace.layers[layer].new_latent[b])
        latent.push_back(RoundToBf16(v));
      for (float v : trace.layers[layer].new_key[b])
        key.push_back(nvfp4::E4M3ToFloat(nvfp4::FloatToE4M3(v)));
      g.latent[layer].push_back(latent);
      g.keys[layer].push_back(key);
    }
  }
  StepSpec second = spec;
  second.context = spec.context + 1;
  second.generated = &g;
  const auto by_hand = DecodeStep(second, nullptr);
  ASSERT_TRUE(by_hand.ok());
  EXPECT_EQ((*steps)[1], *by_hand);
}

TEST(DecodeStepsTest, ShardedSpecsAndNoStepsAreRefused) {
  StepSpec spec = TinySpec(1, 4);
  EXPECT_EQ(DecodeSteps(spec, 0, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  spec.shard = Shard{2, 1, 0};
  const auto sharded = DecodeSteps(spec, 2, nullptr);
  EXPECT_EQ(sharded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sharded.status().message().find("tp * ep"), std::string::npos);
}

}  // namespace
}  // namespace moetune::ref
