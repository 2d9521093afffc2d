#include "common/comm/comm_model.h"

#include "gtest/gtest.h"

namespace moetune::comm {
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
  shape.all_reduce = v1::ALL_REDUCE_ONESHOT;  // 2000 B at 500 B/us + 1 us
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

// Data-parallel attention, world 4 (tp 2 x ep 2), 3 layers of which 1 is
// dense: 2 MoE layers, each an all-gather of the BF16 input [4][1000] =
// 8000 bytes in all (3/4 over the link -> 6 us, plus the 3 us latency) and
// a reduce-scatter of the FP32 output, 16000 bytes (12 us + 3 us): 2 x 24
// us. No sums of attention or the dense MLP and no token gather.
TEST(CommModelTest, DpAttentionGathersAndScattersEveryMoeLayerByHand) {
  CommShape shape;
  shape.batch = 4;
  shape.hidden = 1000;
  shape.tp = 2;
  shape.ep = 2;
  shape.layers = 3;
  shape.whole_step = true;
  shape.dense_layers = 1;
  shape.dp_attention = true;
  EXPECT_DOUBLE_EQ(ModelGatherOrScatterUs(ByHand(), v1::ALL_REDUCE_NCCL,
                                          "allgather", 4, 16000),
                   15.0);
  EXPECT_DOUBLE_EQ(ModelCommFloorUs(shape, ByHand()), 2 * (9.0 + 15.0));
  // By the one-shot kernel at 500 B/us + 1 us: 6000 B -> 13 us, 12000 B ->
  // 25 us.
  shape.all_reduce = v1::ALL_REDUCE_ONESHOT;
  EXPECT_DOUBLE_EQ(ModelCommFloorUs(shape, ByHand()), 2 * (13.0 + 25.0));
  // The same step with tp attention: 6 sums of 16000 bytes (24000 B on the
  // link -> 24 us + 3 us) and the gather of 128 bytes (192 B -> 0.192 us +
  // 3 us).
  shape.all_reduce = v1::ALL_REDUCE_NCCL;
  shape.dp_attention = false;
  EXPECT_DOUBLE_EQ(ModelCommFloorUs(shape, ByHand()), 6 * 27.0 + 3.192);
}

TEST(CommModelTest, DpAttentionWithoutMoeLayersOrPeersCommunicatesNothing) {
  CommShape shape;
  shape.batch = 4;
  shape.hidden = 1000;
  shape.tp = 4;
  shape.layers = 1;
  shape.whole_step = true;
  shape.dense_layers = 1;  // the one layer run is dense
  shape.dp_attention = true;
  EXPECT_EQ(ModelCommFloorUs(shape, ByHand()), 0);
  shape.layers = 3;
  shape.tp = 1;  // one rank: nothing to gather
  EXPECT_EQ(ModelCommFloorUs(shape, ByHand()), 0);
  EXPECT_EQ(ModelGatherOrScatterUs(ByHand(), v1::ALL_REDUCE_IMPL_UNSPECIFIED,
                                   "reducescatter", 1, 16000),
            0);
}

// All-gather and reduce-scatter take their implementation's all-reduce fit
// at their world: nccl 10 us and 2000 bytes a us at world 4 (12000 B ->
// 6 us), oneshot 1 us at the same bandwidth.
TEST(CommModelTest, DpAttentionUsesItsImplementationsFitAtItsWorld) {
  CommModelParams params = ByHand();
  v1::CollectiveFit fit;
  fit.set_allreduce("nccl");
  fit.set_world_size(4);
  fit.set_latency_us(10);
  fit.set_bus_gbps(2.0);
  params.fits.push_back(fit);
  fit.set_allreduce("oneshot");
  fit.set_latency_us(1);
  params.fits.push_back(fit);
  EXPECT_DOUBLE_EQ(
      ModelGatherOrScatterUs(params, v1::ALL_REDUCE_IMPL_UNSPECIFIED,
                             "allgather", 4, 16000),
      16.0);
  EXPECT_DOUBLE_EQ(ModelGatherOrScatterUs(params, v1::ALL_REDUCE_ONESHOT,
                                          "reducescatter", 4, 16000),
                   7.0);
  EXPECT_DOUBLE_EQ(ModelGatherOrScatterUs(params, v1::ALL_REDUCE_NCCL,
                                          "allgather", 2, 16000),
                   3.0 + 8.0);
}

// A calibration that measured the all-gather and reduce-scatter themselves
// prices each by its own fit (nccl at world 4: all-reduce 10 us at 2000
// B/us, all-gather 4 us at 4000 B/us, reduce-scatter 6 us at 1000 B/us:
// 12000 B on the link -> 3 and 12 us); in-graph points (one latency each)
// price nothing.
TEST(CommModelTest, EachCollectivesOwnFitPricesIt) {
  CommModelParams params = ByHand();
  v1::CollectiveFit fit;
  fit.set_allreduce("nccl");
  fit.set_world_size(4);
  fit.set_latency_us(0.5);
  fit.set_in_graph(true);
  fit.set_op("allgather");
  params.fits.push_back(fit);  // an in-graph point, listed first
  fit.set_in_graph(false);
  fit.set_op("");  // a file written before the field: the all-reduce
  fit.set_latency_us(10);
  fit.set_bus_gbps(2.0);
  params.fits.push_back(fit);
  fit.set_op("allgather");
  fit.set_latency_us(4);
  fit.set_bus_gbps(4.0);
  params.fits.push_back(fit);
  fit.set_op("reducescatter");
  fit.set_latency_us(6);
  fit.set_bus_gbps(1.0);
  params.fits.push_back(fit);
  EXPECT_DOUBLE_EQ(ModelGatherOrScatterUs(params, v1::ALL_REDUCE_NCCL,
                                          "allgather", 4, 16000),
                   7.0);
  EXPECT_DOUBLE_EQ(ModelGatherOrScatterUs(params, v1::ALL_REDUCE_NCCL,
                                          "reducescatter", 4, 16000),
                   18.0);
  EXPECT_DOUBLE_EQ(ModelAllReduceUs(params, v1::ALL_REDUCE_NCCL, 4, 16000),
                   10.0 + 12.0);
  EXPECT_DOUBLE_EQ(
      CostOf(params, v1::ALL_REDUCE_NCCL, 4, "allreduce").latency_us, 10.0);
}

TEST(CommModelTest, AMeasuredFitReplacesTheAssumptionAtItsWorldOnly) {
  CommModelParams params = ByHand();
  v1::CollectiveFit fit;
  fit.set_allreduce("nccl");
  fit.set_world_size(2);
  fit.set_latency_us(10);
  fit.set_bus_gbps(2.0);
  params.fits.push_back(fit);
  EXPECT_DOUBLE_EQ(
      ModelAllReduceUs(params, v1::ALL_REDUCE_IMPL_UNSPECIFIED, 2, 4000),
      10.0 + 2.0);
  EXPECT_DOUBLE_EQ(ModelAllReduceUs(params, v1::ALL_REDUCE_NCCL, 4, 4000),
                   3.0 + 6.0);
  EXPECT_DOUBLE_EQ(ModelAllReduceUs(params, v1::ALL_REDUCE_ONESHOT, 2, 4000),
                   1.0 + 8.0);
}

}  // namespace
}  // namespace moetune::comm
