#include "worker/comm_model.h"

#include "gtest/gtest.h"

namespace moetune::worker {
namespace {

TEST(CommModelTest, NoCommunicationOnOneRank) {
  CommShape shape;
  shape.batch = 8;
  shape.hidden = 6144;
  EXPECT_EQ(ModelCommFloorUs(shape), 0);
}

TEST(CommModelTest, TensorParallelRingAllReduceByHand) {
  CommShape shape;
  shape.batch = 1;
  shape.hidden = 1000;  // 2000 bytes of BF16
  shape.tp = 2;
  CommModelParams params;
  params.link_gbps = 1.0;  // 1000 bytes per us
  params.latency_us = 3.0;
  // 2 (t-1)/t * 2000 B = 2000 B -> 2 us, plus 2 (t-1) latencies = 6 us.
  EXPECT_DOUBLE_EQ(ModelCommFloorUs(shape, params), 8.0);
}

TEST(CommModelTest, ExpertParallelDispatchAndCombineByHand) {
  CommShape shape;
  shape.batch = 2;
  shape.hidden = 500;  // 2000 bytes per step of activations
  shape.top_k = 4;
  shape.ep = 4;
  shape.layers = 3;
  CommModelParams params;
  params.link_gbps = 1.0;
  params.latency_us = 1.0;
  // Remote bytes: 2000 * 4 * 3/4 = 6000 -> 6 us; twice (+1 us latency each).
  EXPECT_DOUBLE_EQ(ModelCommFloorUs(shape, params), 3 * 2 * (6.0 + 1.0));
}

// A whole step of 3 layers (1 dense) at tp 2, ep 1 (world 2): each layer's
// attention all-reduce over the world (8 us, as above), the dense layer's
// MLP all-reduce, the 2 MoE layers' TP all-reduces, one gather latency.
TEST(CommModelTest, WholeStepAllReducesEveryBlockByHand) {
  CommShape shape;
  shape.batch = 1;
  shape.hidden = 1000;
  shape.tp = 2;
  shape.layers = 3;
  shape.whole_step = true;
  shape.dense_layers = 1;
  CommModelParams params;
  params.link_gbps = 1.0;
  params.latency_us = 3.0;
  EXPECT_DOUBLE_EQ(ModelCommFloorUs(shape, params),
                   3 * 8.0 + 8.0 + 2 * 8.0 + 3.0);
  shape.tp = 1;
  EXPECT_EQ(ModelCommFloorUs(shape, params), 0);
}

}  // namespace
}  // namespace moetune::worker
