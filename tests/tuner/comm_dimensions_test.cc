// The all-reduce and communication dimensions: validated with the field and
// the allowed values (in either spelling of the all-reduce list), expanded
// by every strategy, and keyed so that sweeps that do not list them keep
// their keys.
#include <set>
#include <string>
#include <vector>

#include "common/legacy_spelling.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tuner/strategy_test_util.h"
#include "tuner/config_key.h"
#include "tuner/spec.h"
#include "tuner/strategy.h"

namespace moetune::tuner {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TinyLayerSpec;

// cpu_reference over tp {1, 2}: one point at tp 1, and all-reduce x
// communication at tp 2. The all-reduces in their legacy spelling, as spec
// files write them.
v1::SweepSpec CommSpec(const std::string& strategy) {
  return TinyLayerSpec(R"pb(
                         space {
                           moe_backends: "cpu_reference"
                           tp: 1
                           tp: 2
                           allreduce: "nccl"
                           allreduce: "oneshot"
                           communication: MODELLED
                           communication: MEASURED
                         }
                       )pb" +
                       strategy);
}

std::vector<std::string> ConfigKeys(const std::vector<v1::Trial>& trials) {
  std::vector<std::string> keys;
  for (const v1::Trial& t : trials) keys.push_back(ConfigKey(t.config()));
  return keys;
}

TEST(CommDimensionsTest, BadAllreduceNamesTheFieldAndTheAllowedValues) {
  v1::SweepSpec spec = CommSpec("");
  spec.mutable_space()->set_allreduce(1, "ring");
  const absl::Status status = ValidateSweepSpec(spec);
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_EQ(status.message(),
            "space.allreduce[1]: 'ring' is not allowed; allowed: nccl, "
            "oneshot");
  spec.mutable_space()->set_allreduce(1, "nccl");
  EXPECT_THAT(ValidateSweepSpec(spec).message(),
              HasSubstr("space.allreduce[1]: 'nccl' is repeated"));
}

TEST(CommDimensionsTest, TheEnumListIsValidatedInItsOwnNames) {
  v1::SweepSpec spec = CommSpec("");
  spec.mutable_space()->clear_allreduce();
  spec.mutable_space()->add_all_reduce_impls(v1::ALL_REDUCE_ONESHOT);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
  spec.mutable_space()->add_all_reduce_impls(v1::ALL_REDUCE_IMPL_UNSPECIFIED);
  EXPECT_EQ(ValidateSweepSpec(spec).message(),
            "space.all_reduce_impls[1]: ALL_REDUCE_IMPL_UNSPECIFIED is not "
            "allowed; allowed: ALL_REDUCE_NCCL, ALL_REDUCE_ONESHOT");
  spec.mutable_space()->set_all_reduce_impls(1, v1::ALL_REDUCE_ONESHOT);
  EXPECT_THAT(ValidateSweepSpec(spec).message(),
              HasSubstr("space.all_reduce_impls[1]: ALL_REDUCE_ONESHOT is "
                        "repeated"));
  // Both spellings at once: one list too many.
  spec.mutable_space()->add_allreduce("nccl");
  EXPECT_EQ(ValidateSweepSpec(spec).message(),
            "space.allreduce: listed beside space.all_reduce_impls; list the "
            "values in one of them");
}

// The legacy spelling plans, keys and hashes the same points as the enums.
TEST(CommDimensionsTest, BothSpellingsPlanTheSamePoints) {
  v1::SweepSpec enums = CommSpec("");
  enums.mutable_space()->clear_allreduce();
  enums.mutable_space()->add_all_reduce_impls(v1::ALL_REDUCE_NCCL);
  enums.mutable_space()->add_all_reduce_impls(v1::ALL_REDUCE_ONESHOT);
  const absl::StatusOr<std::vector<v1::Trial>> legacy =
      testing::Expand(CommSpec(""));
  const absl::StatusOr<std::vector<v1::Trial>> planned = testing::Expand(enums);
  ASSERT_TRUE(legacy.ok()) << legacy.status();
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_EQ(ConfigKeys(*legacy), ConfigKeys(*planned));
  for (size_t i = 0; i < legacy->size(); ++i) {
    EXPECT_EQ((*legacy)[i].SerializeAsString(),
              (*planned)[i].SerializeAsString());
    EXPECT_TRUE((*legacy)[i].config().allreduce().empty());
  }
}

TEST(CommDimensionsTest, BadCommunicationNamesTheFieldAndTheAllowedValues) {
  v1::SweepSpec spec = CommSpec("");
  spec.mutable_space()->set_communication(0, v1::COMMUNICATION_UNSPECIFIED);
  EXPECT_EQ(ValidateSweepSpec(spec).message(),
            "space.communication[0]: COMMUNICATION_UNSPECIFIED is not "
            "allowed; allowed: MODELLED, MEASURED");
  spec.mutable_space()->set_communication(0, static_cast<v1::Communication>(7));
  EXPECT_EQ(ValidateSweepSpec(spec).message(),
            "space.communication[0]: 7 is not allowed; allowed: MODELLED, "
            "MEASURED");
}

TEST(CommDimensionsTest, ExpandedWhereThereIsMoreThanOneRankOrAGangOfOne) {
  const absl::StatusOr<std::vector<v1::Trial>> trials =
      testing::Expand(CommSpec(""));
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_THAT(
      ConfigKeys(*trials),
      ElementsAre("cpu_reference|-|1|1|0", "cpu_reference|-|1|1|0|measured",
                  "cpu_reference|-|1|1|0|oneshot|measured",
                  "cpu_reference|-|2|1|0", "cpu_reference|-|2|1|0|measured",
                  "cpu_reference|-|2|1|0|oneshot",
                  "cpu_reference|-|2|1|0|oneshot|measured"));
  // The modelled world of one rank keeps the defaults (no collectives to
  // choose); a measured one is a gang of one, each all-reduce run for real.
  EXPECT_EQ((*trials)[0].config().all_reduce_impl(),
            v1::ALL_REDUCE_IMPL_UNSPECIFIED);
  EXPECT_EQ((*trials)[0].config().communication(),
            v1::COMMUNICATION_UNSPECIFIED);
  EXPECT_EQ((*trials)[1].config().communication(), v1::MEASURED);
  EXPECT_EQ((*trials)[2].config().all_reduce_impl(), v1::ALL_REDUCE_ONESHOT);
  EXPECT_EQ((*trials)[4].config().communication(), v1::MEASURED);
  EXPECT_EQ((*trials)[5].config().all_reduce_impl(), v1::ALL_REDUCE_ONESHOT);
}

TEST(CommDimensionsTest, AWorldOfOneWithoutMeasuredKeepsOnePoint) {
  v1::SweepSpec spec = CommSpec("");
  spec.mutable_space()->clear_communication();
  spec.mutable_space()->add_communication(v1::MODELLED);
  const absl::StatusOr<std::vector<v1::Trial>> trials = testing::Expand(spec);
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_EQ(ConfigKeys(*trials)[0], "cpu_reference|-|1|1|0");
  EXPECT_EQ(ConfigKeys(*trials)[1], "cpu_reference|-|2|1|0");
}

TEST(CommDimensionsTest, UnlistedDimensionsKeepOldConfigsAndKeys) {
  const absl::StatusOr<std::vector<v1::Trial>> trials =
      testing::Expand(TinyLayerSpec(R"pb(
        space { moe_backends: "cpu_blocked" tp: 2 ep: 4 }
      )pb"));
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 1u);
  const v1::TrialConfig& config = (*trials)[0].config();
  EXPECT_EQ(config.all_reduce_impl(), v1::ALL_REDUCE_IMPL_UNSPECIFIED);
  EXPECT_EQ(config.communication(), v1::COMMUNICATION_UNSPECIFIED);
  EXPECT_EQ(ConfigKey(config), "cpu_blocked|4x64|2|4|0");
  EXPECT_EQ(AllreduceName(config), "nccl");
  EXPECT_FALSE(IsMeasured(config));
}

TEST(CommDimensionsTest, DefaultsSpelledOutKeyAsTheUnsetOnes) {
  v1::TrialConfig config;
  config.set_moe_backend("fused_gemv");
  config.set_tp(2);
  config.set_ep(1);
  const std::string unset = ConfigKey(config);
  config.set_all_reduce_impl(v1::ALL_REDUCE_NCCL);
  config.set_communication(v1::MODELLED);
  EXPECT_EQ(ConfigKey(config), unset);
  config.set_communication(v1::MEASURED);
  EXPECT_EQ(ConfigKey(config), unset + "|measured");
  config.set_all_reduce_impl(v1::ALL_REDUCE_ONESHOT);
  EXPECT_EQ(ConfigKey(config), "fused_gemv|-|2|1|0|oneshot|measured");
}

// A config stored in the legacy spelling keys as it always did once read:
// the keys of stored proposals keep matching.
TEST(CommDimensionsTest, LegacyConfigsKeepTheirKeys) {
  v1::TrialConfig config;
  config.set_moe_backend("cpu_reference");
  config.set_tp(2);
  config.set_ep(1);
  config.set_allreduce("oneshot");
  config.set_attention("dp");
  ASSERT_TRUE(NormalizeLegacyFields(config).ok());
  EXPECT_EQ(ConfigKey(config), "cpu_reference|-|2|1|0|oneshot|dp");
  EXPECT_EQ(AllreduceName(config), "oneshot");
  config.Clear();
  config.set_moe_backend("cpu_reference");
  config.set_tp(2);
  config.set_ep(1);
  config.set_allreduce("nccl");
  config.set_attention("tp");
  ASSERT_TRUE(NormalizeLegacyFields(config).ok());
  EXPECT_EQ(ConfigKey(config), "cpu_reference|-|2|1|0");
}

class EveryStrategyTest : public ::testing::TestWithParam<v1::Strategy::Kind> {
};

TEST_P(EveryStrategyTest, ProposesEveryCommunicationPoint) {
  const v1::SweepSpec spec = CommSpec(absl::StrCat(
      "strategy { kind: ", v1::Strategy::Kind_Name(GetParam()), " seed: 3 }"));
  std::unique_ptr<Strategy> strategy = *MakeStrategy(spec.strategy());
  const testing::Driven run =
      testing::Drive(*strategy, spec, [](v1::Trial& trial, int64_t id) {
        // Measured and one-shot configs are slower: any order will do.
        const v1::TrialConfig& c = trial.config();
        testing::Finish(trial, id,
                        100.0 + (IsMeasured(c) ? 10 : 0) +
                            (IsOneshotAllReduce(c) ? 5 : 0) + c.tp());
      });
  std::set<std::string> keys;
  for (const v1::Trial& trial : run.trials) {
    keys.insert(ConfigKey(trial.config()));
  }
  const std::set<std::string> all = {"cpu_reference|-|1|1|0",
                                     "cpu_reference|-|1|1|0|measured",
                                     "cpu_reference|-|1|1|0|oneshot|measured",
                                     "cpu_reference|-|2|1|0",
                                     "cpu_reference|-|2|1|0|measured",
                                     "cpu_reference|-|2|1|0|oneshot",
                                     "cpu_reference|-|2|1|0|oneshot|measured"};
  if (GetParam() != v1::Strategy::TPE) {
    EXPECT_EQ(keys, all);
    return;
  }
  // TPE leaves out what it believes slow, but proposes only points of the
  // space and explores both new dimensions.
  EXPECT_THAT(keys, ::testing::IsSubsetOf(all));
  EXPECT_TRUE(keys.count("cpu_reference|-|2|1|0|measured"));
  EXPECT_TRUE(keys.count("cpu_reference|-|2|1|0|oneshot"));
}

INSTANTIATE_TEST_SUITE_P(Kinds, EveryStrategyTest,
                         ::testing::Values(v1::Strategy::GRID,
                                           v1::Strategy::RANDOM,
                                           v1::Strategy::SUCCESSIVE_HALVING,
                                           v1::Strategy::TPE));

}  // namespace
}  // namespace moetune::tuner
