#include "worker/comm_model.h"

#include "gtest/gtest.h"

namespace moetune::worker {
namespace {

CommModelParams ByHand() {
  CommModelParams params;
  params.nccl = {3.0, 1.0};     // 3 us, 1000 bytes a us
  params.oneshot = {1.0, 0.5};  // 1 us, 500 bytes a us
  return params;
}

TEST(CommModelTest, NoCommunicationOnOneRank) {
  CommShape shape;
  shape.batch = 8;
  shape.hidden = 6144;
  EXPECT_EQ(ModelCommFloorUs(shape), 0);
  shape.whole_step = true;
  EXPECT_EQ(ModelCommFloorUs(shape), 0);
}

TEST(CommModelTest, TensorParallelAllReduceByHand) {
  CommShape shape;
  shape.batch = 1;
  shape.hidden = 1000;  // 2000 bytes of BF16
  shape.tp = 2;
  // 2 (t-1)/t * 2000 B = 2000 B -> 2 us, plus the 3 us latency.
  EXPECT_DOUBLE_EQ(ModelCommFloorUs(shape, ByHand()), 5.0);
  shape.allreduce = "oneshot";  // 2000 B at 500 B/us + 1 us
  EXPECT_DOUBLE_EQ(ModelCommFloorUs(shape, ByHand()), 5.0);
}

TEST(CommModelTest, ExpertParallelDispatchAndCombineByHand) {
  CommShape shape;
  shape.batch = 2;
  shape.hidden = 500;  // 2000 bytes per step of activations
  shape.top_k = 4;
  shape.ep = 4;
  shape.layers = 3;
  // Remote bytes: 2000 * 4 * 3/4 = 6000 -> 6 us; twice (+3 us latency each).
  EXPECT_DOUBLE_EQ(ModelCommFloorUs(shape, ByHand()), 3 * 2 * (6.0 + 3.0));
}

// A whole step of 3 layers at tp 2, ep 1 (world 2): 6 sums of 4000 bytes
// (FP32 [1][1000]: 4000 B over the link -> 4 us + 3 us) and the gather of
// 16 bytes (0.016 us + 3 us).
TEST(CommModelTest, WholeStepSumsEveryBlockAndGathersTheTokensByHand) {
  CommShape shape;
  shape.batch = 1;
  shape.hidden = 1000;
  shape.tp = 2;
  shape.layers = 3;
  shape.whole_step = true;
  shape.dense_layers = 1;
  EXPECT_DOUBLE_EQ(ModelCommFloorUs(shape, ByHand()),
                   6 * 7.0 + 3.0 + 16.0 / 1000);
}

TEST(CommModelTest, AMeasuredFitReplacesTheAssumptionAtItsWorldOnly) {
  CommModelParams params = ByHand();
  v1::CollectiveFit fit;
  fit.set_allreduce("nccl");
  fit.set_world_size(2);
  fit.set_latency_us(10);
  fit.set_bus_gbps(2.0);
  params.fits.push_back(fit);
  EXPECT_DOUBLE_EQ(ModelAllReduceUs(params, "", 2, 4000), 10.0 + 2.0);
  EXPECT_DOUBLE_EQ(ModelAllReduceUs(params, "nccl", 4, 4000), 3.0 + 6.0);
  EXPECT_DOUBLE_EQ(ModelAllReduceUs(params, "oneshot", 2, 4000), 1.0 + 8.0);
}

}  // namespace
}  // namespace moetune::worker
