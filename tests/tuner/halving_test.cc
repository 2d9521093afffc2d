#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tuner/strategy_test_util.h"
#include "tuner/halving_strategy.h"
#include "tuner/search.h"

namespace moetune::tuner {
namespace {

using ::testing::ElementsAre;
using testing::Finish;
using testing::ProposeFor;
using testing::TinyLayerSpec;

Knobs WithEta(int eta, int min_iterations = 0) {
  Knobs knobs;
  knobs.eta = eta;
  knobs.min_iterations = min_iterations;
  return knobs;
}

TEST(PlanRungsTest, ByHand) {
  // 36 configs, 20 iterations, eta 3: 36 -> 12 -> 4 -> 2 would allow three
  // screening rungs, but rung 3 would time 3 iterations like rung 2.
  EXPECT_THAT(PlanRungs(36, 20, WithEta(3)).iterations, ElementsAre(20, 6, 3));
  // 5 configs: ceil(5/3) = 2 at rung 0, then 1: one screening rung.
  EXPECT_THAT(PlanRungs(5, 20, WithEta(3)).iterations, ElementsAre(20, 6));
  // 3 configs: one would be left at rung 0: no screening.
  EXPECT_THAT(PlanRungs(3, 20, WithEta(3)).iterations, ElementsAre(20));
  // min_iterations raises the floor: 20/9 = 2 -> 5.
  EXPECT_THAT(PlanRungs(36, 20, WithEta(3, 5)).iterations,
              ElementsAre(20, 6, 5));
  // eta 2, 9 configs, 27 iterations: 9 -> 5 -> 3 -> 2.
  EXPECT_THAT(PlanRungs(9, 27, WithEta(2)).iterations,
              ElementsAre(27, 13, 6, 3));
  // Too few iterations to screen: 4 iterations, 4/3 = 1 -> 3, then 3 again.
  EXPECT_THAT(PlanRungs(36, 4, WithEta(3)).iterations, ElementsAre(4, 3));
}

// 9 points: cpu_reference x ep {1, 2, 4}, cpu_blocked 4x64 and 8x128 x ep.
v1::SweepSpec NineSpec() {
  return TinyLayerSpec(R"pb(
    space {
      moe_backends: "cpu_reference"
      moe_backends: "cpu_blocked"
      tiles { block_n: 4 block_k: 64 }
      tiles { block_n: 8 block_k: 128 }
      ep: 1
      ep: 2
      ep: 4
    }
    strategy { kind: SUCCESSIVE_HALVING eta: 2 }
    measurement { iterations: 27 }
  )pb");
}

// Point i (grid order) has median 100 + 10 * (8 - i): the last is fastest.
// Point 8 is INCORRECT and point 7 FAILED at every rung: never promoted.
void FinishByIndex(std::vector<v1::Trial>& batch, int64_t& next_id) {
  for (v1::Trial& t : batch) {
    const int i = (t.config().moe_backend() == "cpu_reference" ? 0
                   : t.config().tile().block_n() == 4          ? 3
                                                               : 6) +
                  (t.config().ep() == 1   ? 0
                   : t.config().ep() == 2 ? 1
                                          : 2);
    const v1::TrialState state = i == 8   ? v1::INCORRECT
                                 : i == 7 ? v1::FAILED
                                          : v1::DONE;
    Finish(t, next_id++, 100 + 10 * (8 - i), state);
  }
}

std::vector<std::string> Configs(const std::vector<v1::Trial>& trials) {
  std::vector<std::string> out;
  for (const v1::Trial& t : trials) out.push_back(ConfigKey(t.config()));
  return out;
}

TEST(HalvingTest, PromotesTheBestDoneOnesRungByRung) {
  const v1::SweepSpec spec = NineSpec();
  HalvingStrategy halving;
  std::vector<v1::Trial> history;
  int64_t id = 1;
  // Rung 3: all 9 points, 3 iterations.
  std::vector<v1::Trial> batch = *ProposeFor(halving, spec, history);
  ASSERT_EQ(batch.size(), 9u);
  for (const v1::Trial& t : batch) {
    EXPECT_EQ(t.rung(), 3);
    EXPECT_EQ(t.measurement().iterations(), 3);
  }
  // Not every rung-3 trial is final yet: nothing to promote.
  std::vector<v1::Trial> partial = batch;
  std::vector<v1::Trial> head(partial.begin(), partial.end() - 1);
  FinishByIndex(head, id);
  head.push_back(partial.back());
  EXPECT_TRUE(ProposeFor(halving, spec, head)->empty());
  id = 1;
  FinishByIndex(batch, id);
  history = batch;
  // Rung 2: 7 DONE (points 7 and 8 never advance), ceil(7/2) = 4: points
  // 6, 5, 4, 3 by median, 6 iterations.
  batch = *ProposeFor(halving, spec, history);
  EXPECT_THAT(Configs(batch),
              ElementsAre("cpu_blocked|8x128|1|1|0", "cpu_blocked|4x64|1|4|0",
                          "cpu_blocked|4x64|1|2|0", "cpu_blocked|4x64|1|1|0"));
  for (const v1::Trial& t : batch) {
    EXPECT_EQ(t.rung(), 2);
    EXPECT_EQ(t.measurement().iterations(), 6);
  }
  FinishByIndex(batch, id);
  history.insert(history.end(), batch.begin(), batch.end());
  // Rung 1: ceil(4/2) = 2, 13 iterations; rung 0: ceil(2/2) = 1, 27.
  batch = *ProposeFor(halving, spec, history);
  EXPECT_THAT(Configs(batch),
              ElementsAre("cpu_blocked|8x128|1|1|0", "cpu_blocked|4x64|1|4|0"));
  EXPECT_EQ(batch[0].measurement().iterations(), 13);
  FinishByIndex(batch, id);
  history.insert(history.end(), batch.begin(), batch.end());
  batch = *ProposeFor(halving, spec, history);
  EXPECT_THAT(Configs(batch), ElementsAre("cpu_blocked|8x128|1|1|0"));
  EXPECT_EQ(batch[0].rung(), 0);
  EXPECT_EQ(batch[0].measurement().iterations(), 27);
  FinishByIndex(batch, id);
  history.insert(history.end(), batch.begin(), batch.end());
  EXPECT_TRUE(ProposeFor(halving, spec, history)->empty());
}

TEST(HalvingTest, NothingDoneNothingPromoted) {
  const v1::SweepSpec spec = NineSpec();
  HalvingStrategy halving;
  std::vector<v1::Trial> batch = *ProposeFor(halving, spec, {});
  int64_t id = 1;
  for (v1::Trial& t : batch) Finish(t, id++, 0, v1::FAILED);
  EXPECT_TRUE(ProposeFor(halving, spec, batch)->empty());
}

}  // namespace
}  // namespace moetune::tuner
