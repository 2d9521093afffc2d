// The attention dimension (data-parallel attention,
// TrialConfig.attention_split): validated with the field and the allowed
// values (in either spelling of the list), expanded where the batch splits
// over more than one rank, proposed by every strategy, keyed so that sweeps
// that do not list it keep their keys, and rebuilt from a recording.
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tuner/strategy_test_util.h"
#include "tuner/config_key.h"
#include "tuner/replay.h"
#include "tuner/spec.h"
#include "tuner/strategy.h"

namespace moetune::tuner {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Parse;

// tiny's whole decode step at `batches` (text format: "batch_sizes: 4"),
// with `rest` (space, strategy) after it. tiny's 4 heads split over worlds
// of 1, 2 and 4 ranks.
v1::SweepSpec TinyStepSpec(const std::string& batches,
                           const std::string& rest) {
  return Parse(R"pb(workload { model_preset: "tiny" layers: 2
                               context_lengths: 16
                               region: DECODE_STEP
               )pb" +
               batches + "}\n" + rest);
}

// cpu_reference over tp {1, 2}, both attentions (in their legacy spelling,
// as spec files write them), at `batches`.
v1::SweepSpec AttentionSpec(const std::string& batches,
                            const std::string& rest = "") {
  return TinyStepSpec(batches, R"pb(
                                     space {
                                       moe_backends: "cpu_reference"
                                       tp: 1
                                       tp: 2
                                       attention: "tp"
                                       attention: "dp"
                                     }
                                   )pb" +
                                   rest);
}

std::vector<std::string> ConfigKeys(const std::vector<v1::Trial>& trials) {
  std::vector<std::string> keys;
  for (const v1::Trial& t : trials) keys.push_back(ConfigKey(t.config()));
  return keys;
}

std::string ErrorOf(const v1::SweepSpec& spec) {
  const absl::Status status = ValidateSweepSpec(spec);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  return std::string(status.message());
}

TEST(AttentionDimensionTest, BadAttentionNamesTheFieldAndTheAllowedValues) {
  v1::SweepSpec spec = AttentionSpec("batch_sizes: 4");
  EXPECT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
  spec.mutable_space()->set_attention(1, "sp");
  EXPECT_EQ(ErrorOf(spec),
            "space.attention[1]: 'sp' is not allowed; allowed: tp, dp");
  spec.mutable_space()->set_attention(1, "");
  EXPECT_EQ(ErrorOf(spec),
            "space.attention[1]: '' is not allowed; allowed: tp, dp");
  spec.mutable_space()->set_attention(1, "tp");
  EXPECT_THAT(ErrorOf(spec),
              HasSubstr("space.attention[1]: 'tp' is repeated (first at [0])"));
}

TEST(AttentionDimensionTest, TheEnumListIsValidatedInItsOwnNames) {
  v1::SweepSpec spec = AttentionSpec("batch_sizes: 4");
  spec.mutable_space()->clear_attention();
  spec.mutable_space()->add_attention_splits(v1::ATTENTION_TP);
  spec.mutable_space()->add_attention_splits(v1::ATTENTION_DP);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
  spec.mutable_space()->set_attention_splits(1, v1::ATTENTION_TP);
  EXPECT_THAT(ErrorOf(spec), HasSubstr("space.attention_splits[1]: "
                                       "ATTENTION_TP is repeated"));
  spec.mutable_space()->set_attention_splits(
      1, static_cast<v1::AttentionSplit>(9));
  EXPECT_EQ(ErrorOf(spec),
            "space.attention_splits[1]: 9 is not allowed; allowed: "
            "ATTENTION_TP, ATTENTION_DP");
  spec.mutable_space()->set_attention_splits(1, v1::ATTENTION_DP);
  spec.mutable_workload()->set_region(v1::MOE_LAYER);
  EXPECT_THAT(ErrorOf(spec),
              HasSubstr("space.attention_splits[1]: ATTENTION_DP splits a "
                        "decode step's batch"));
  EXPECT_THAT(ErrorOf(spec),
              HasSubstr("with region MOE_LAYER allowed: ATTENTION_TP;"));
}

TEST(AttentionDimensionTest, DpNeedsAWholeDecodeStep) {
  v1::SweepSpec spec = AttentionSpec("batch_sizes: 4");
  spec.mutable_workload()->set_region(v1::MOE_LAYER);
  EXPECT_EQ(ErrorOf(spec),
            "space.attention[1]: 'dp' splits a decode step's batch over the "
            "ranks with attention whole on each; an MoE layer has no "
            "attention: with region MOE_LAYER allowed: tp; set region: "
            "DECODE_STEP to time it");
  spec.mutable_space()->mutable_attention()->RemoveLast();
  EXPECT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
  // Unset is DECODE_STEP.
  spec = AttentionSpec("batch_sizes: 4");
  spec.mutable_workload()->set_region(v1::REGION_UNSPECIFIED);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
}

// Batch 1 does not split over 2 ranks: tp only there. Batch 4 does: both,
// the layout (tp, attention) outside the all-reduce, which under dp names
// the implementation of its all-gather and reduce-scatter. At one rank dp
// is tp: one unset point.
TEST(AttentionDimensionTest, DpWhereTheBatchSplitsOverMoreThanOneRank) {
  v1::SweepSpec spec = AttentionSpec("batch_sizes: 1 batch_sizes: 4");
  spec.mutable_space()->add_all_reduce_impls(v1::ALL_REDUCE_NCCL);
  spec.mutable_space()->add_all_reduce_impls(v1::ALL_REDUCE_ONESHOT);
  const absl::StatusOr<std::vector<v1::Trial>> trials = testing::Expand(spec);
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_THAT(ConfigKeys(*trials),
              ElementsAre(
                  // batch 1
                  "cpu_reference|-|1|1|0", "cpu_reference|-|2|1|0",
                  "cpu_reference|-|2|1|0|oneshot",
                  // batch 4
                  "cpu_reference|-|1|1|0", "cpu_reference|-|2|1|0",
                  "cpu_reference|-|2|1|0|oneshot", "cpu_reference|-|2|1|0|dp",
                  "cpu_reference|-|2|1|0|oneshot|dp"));
  EXPECT_EQ((*trials)[0].config().attention_split(),
            v1::ATTENTION_SPLIT_UNSPECIFIED);
  EXPECT_EQ((*trials)[1].config().attention_split(), v1::ATTENTION_TP);
  EXPECT_EQ((*trials)[3].config().attention_split(),
            v1::ATTENTION_SPLIT_UNSPECIFIED);
  EXPECT_EQ((*trials)[6].config().attention_split(), v1::ATTENTION_DP);
  EXPECT_EQ((*trials)[6].config().all_reduce_impl(), v1::ALL_REDUCE_NCCL);
  EXPECT_EQ((*trials)[6].workload().batch_size(), 4);
  EXPECT_EQ((*trials)[7].config().attention_split(), v1::ATTENTION_DP);
  EXPECT_EQ((*trials)[7].config().all_reduce_impl(), v1::ALL_REDUCE_ONESHOT);
  for (const v1::Trial& t : *trials) {
    EXPECT_TRUE(t.config().attention().empty());  // never the legacy field
  }
}

// tiny's 4 heads do not split over 8 ranks, so tp attention has no step at
// tp 8; dp keeps attention whole on every rank and has one.
TEST(AttentionDimensionTest, DpKeepsLayoutsWhoseHeadsDoNotSplit) {
  const absl::StatusOr<std::vector<v1::Trial>> trials =
      testing::Expand(TinyStepSpec("batch_sizes: 8", R"pb(
        space {
          moe_backends: "cpu_reference"
          tp: 8
          attention: "tp"
          attention: "dp"
        }
      )pb"));
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_THAT(ConfigKeys(*trials), ElementsAre("cpu_reference|-|8|1|0|dp"));
}

// A warm trial process keeps its shard while the layout stays: dp's shard
// (attention whole) is another, so the attention varies slower than tiles.
TEST(AttentionDimensionTest, AttentionVariesSlowerThanTiles) {
  const absl::StatusOr<std::vector<v1::Trial>> trials =
      testing::Expand(TinyStepSpec("batch_sizes: 2", R"pb(
        space {
          moe_backends: "cpu_blocked"
          tiles { block_n: 4 block_k: 64 }
          tiles { block_n: 8 block_k: 128 }
          ep: 2
          attention: "tp"
          attention: "dp"
          communication: MODELLED
          communication: MEASURED
        }
      )pb"));
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_THAT(
      ConfigKeys(*trials),
      ElementsAre(
          "cpu_blocked|4x64|1|2|0", "cpu_blocked|4x64|1|2|0|measured",
          "cpu_blocked|8x128|1|2|0", "cpu_blocked|8x128|1|2|0|measured",
          "cpu_blocked|4x64|1|2|0|dp", "cpu_blocked|4x64|1|2|0|measured|dp",
          "cpu_blocked|8x128|1|2|0|dp", "cpu_blocked|8x128|1|2|0|measured|dp"));
}

TEST(AttentionDimensionTest, UnlistedAttentionKeepsOldConfigsAndKeys) {
  const absl::StatusOr<std::vector<v1::Trial>> trials =
      testing::Expand(TinyStepSpec("batch_sizes: 4", R"pb(
        space { moe_backends: "cpu_blocked" tp: 2 ep: 2 }
      )pb"));
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 1u);
  const v1::TrialConfig& config = (*trials)[0].config();
  EXPECT_EQ(config.attention_split(), v1::ATTENTION_SPLIT_UNSPECIFIED);
  EXPECT_EQ(ConfigKey(config), "cpu_blocked|4x64|2|2|0");
  EXPECT_EQ(AttentionName(config), "tp");
  EXPECT_FALSE(IsDpAttention(config));
}

TEST(AttentionDimensionTest, TpSpelledOutKeysAsUnsetAndDpAddsToTheKey) {
  v1::TrialConfig config;
  config.set_moe_backend("fused_gemv");
  config.mutable_tile()->set_block_n(32);
  config.mutable_tile()->set_block_k(256);
  config.set_tp(8);
  config.set_ep(1);
  config.set_cuda_graph(true);
  const std::string unset = ConfigKey(config);
  EXPECT_EQ(ConfigText(config), "fused_gemv 32x256 tp8 ep1 graph");
  config.set_attention_split(v1::ATTENTION_TP);
  EXPECT_EQ(ConfigKey(config), unset);
  EXPECT_EQ(ConfigText(config), "fused_gemv 32x256 tp8 ep1 graph");
  config.set_attention_split(v1::ATTENTION_DP);
  config.set_communication(v1::MEASURED);
  EXPECT_EQ(ConfigKey(config), "fused_gemv|32x256|8|1|1|measured|dp");
  EXPECT_EQ(ConfigText(config),
            "fused_gemv 32x256 tp8 ep1 dp-attn graph "
            "measured");
  EXPECT_EQ(AttentionName(config), "dp");
}

class AttentionEveryStrategyTest
    : public ::testing::TestWithParam<v1::Strategy::Kind> {};

TEST_P(AttentionEveryStrategyTest, ProposesEveryAttentionPoint) {
  const v1::SweepSpec spec = AttentionSpec(
      "batch_sizes: 4",
      absl::StrCat("strategy { kind: ", v1::Strategy::Kind_Name(GetParam()),
                   " seed: 5 }"));
  std::unique_ptr<Strategy> strategy = *MakeStrategy(spec.strategy());
  const testing::Driven run =
      testing::Drive(*strategy, spec, [](v1::Trial& trial, int64_t id) {
        // dp is faster here: any order will do.
        const v1::TrialConfig& c = trial.config();
        testing::Finish(trial, id,
                        100.0 - (IsDpAttention(c) ? 10 : 0) + c.tp());
      });
  std::set<std::string> keys;
  for (const v1::Trial& trial : run.trials) {
    keys.insert(ConfigKey(trial.config()));
  }
  const std::set<std::string> all = {"cpu_reference|-|1|1|0",
                                     "cpu_reference|-|2|1|0",
                                     "cpu_reference|-|2|1|0|dp"};
  if (GetParam() != v1::Strategy::TPE) {
    EXPECT_EQ(keys, all);
    return;
  }
  // TPE leaves out what it believes slow, but proposes only points of the
  // space and finds the fast dp point.
  EXPECT_THAT(keys, ::testing::IsSubsetOf(all));
  EXPECT_TRUE(keys.count("cpu_reference|-|2|1|0|dp"));
}

INSTANTIATE_TEST_SUITE_P(Kinds, AttentionEveryStrategyTest,
                         ::testing::Values(v1::Strategy::GRID,
                                           v1::Strategy::RANDOM,
                                           v1::Strategy::SUCCESSIVE_HALVING,
                                           v1::Strategy::TPE));

// A recording's attentions come back as the space's list, so the replayed
// grid is the recorded one; a recording without them lists none.
TEST(AttentionDimensionTest, ReplayRebuildsTheAttentionList) {
  const v1::SweepSpec spec = AttentionSpec("batch_sizes: 4");
  const absl::StatusOr<std::vector<v1::Trial>> recorded_trials =
      testing::Expand(spec);
  ASSERT_TRUE(recorded_trials.ok()) << recorded_trials.status();
  v1::QueryTrialsResponse recorded;
  for (const v1::Trial& t : *recorded_trials) *recorded.add_trials() = t;
  absl::StatusOr<v1::SweepSpec> replayed = SpecFromRecording(recorded);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_THAT(replayed->space().attention_splits(),
              ElementsAre(v1::ATTENTION_TP, v1::ATTENTION_DP));
  EXPECT_EQ(replayed->workload().region(), v1::DECODE_STEP);
  const absl::StatusOr<std::vector<v1::Trial>> grid =
      testing::Expand(*replayed);
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(ConfigKeys(*grid), ConfigKeys(*recorded_trials));

  for (v1::Trial& t : *recorded.mutable_trials()) {
    t.mutable_config()->clear_attention_split();
  }
  replayed = SpecFromRecording(recorded);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_TRUE(replayed->space().attention_splits().empty());
}

// A recording in the legacy spelling (protobuf JSON of a results file)
// reads as the enums: the same oracle, the same grid.
TEST(AttentionDimensionTest, ARecordingInTheLegacySpellingReplays) {
  const absl::StatusOr<ReplayOracle> oracle = ReplayOracle::FromJson(R"({
    "trials": [{"trialId": "1", "state": "DONE", "workloadHash": "w",
                "config": {"moeBackend": "cpu_reference", "tp": 2, "ep": 1,
                           "allreduce": "oneshot", "attention": "dp"}}]})");
  ASSERT_TRUE(oracle.ok()) << oracle.status();
  const v1::TrialConfig& config = oracle->recorded().trials(0).config();
  EXPECT_EQ(config.all_reduce_impl(), v1::ALL_REDUCE_ONESHOT);
  EXPECT_EQ(config.attention_split(), v1::ATTENTION_DP);
  EXPECT_EQ(ConfigKey(config), "cpu_reference|-|2|1|0|oneshot|dp");
  EXPECT_EQ(ReplayOracle::FromJson(R"({"trials": [{"config":
                {"attention": "sp"}}]})")
                .status()
                .message(),
            "recorded sweep: trials[0].config.attention: 'sp' is not "
            "allowed; allowed: tp, dp");
}

}  // namespace
}  // namespace moetune::tuner
