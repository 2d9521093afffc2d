#include "common/comm/comm_fit.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace moetune::comm {
namespace {

// Points of an exact line: latency + BusBytes / bus (GB/s = 1e3 B/us).
std::vector<CollectiveSample> Line(const std::string& impl,
                                   const std::string& op, int world,
                                   double latency_us, double bus_gbps) {
  std::vector<CollectiveSample> samples;
  for (int64_t bytes : {1024, 8192, 32768, 1 << 20, 64 << 20}) {
    CollectiveSample s;
    s.impl = impl;
    s.op = op;
    s.world = world;
    s.bytes = bytes;
    s.time_us = latency_us + BusBytes(op, world, bytes) / (bus_gbps * 1e3);
    samples.push_back(s);
  }
  return samples;
}

TEST(CommFitTest, BusBytesCountAsNcclTestsDoes) {
  EXPECT_DOUBLE_EQ(BusBytes("allreduce", 4, 1000), 1500);
  EXPECT_DOUBLE_EQ(BusBytes("allgather", 4, 1000), 750);
  EXPECT_DOUBLE_EQ(BusBytes("reducescatter", 8, 800), 700);
  EXPECT_EQ(BusBytes("allreduce", 1, 1000), 0);
}

// The latency is the median of the small messages (three here: the
// middle one's bus time); the bandwidth comes from the largest past it.
TEST(CommFitTest, AStreamFitRecoversItsLineForEachCollective) {
  for (const std::string op : {"allreduce", "allgather", "reducescatter"}) {
    const std::vector<CollectiveSample> samples =
        Line("nccl", op, 8, 10.0, 200.0);
    const v1::CollectiveFit fit = FitStream(samples, "nccl", op, 8);
    const double small_wire = BusBytes(op, 8, 8192) / 200e3;
    EXPECT_EQ(fit.op(), op);
    EXPECT_EQ(fit.allreduce(), "nccl");
    EXPECT_EQ(fit.world_size(), 8);
    EXPECT_DOUBLE_EQ(fit.latency_us(), 10.0 + small_wire) << op;
    EXPECT_NEAR(fit.bus_gbps(), 200.0, 0.2) << op;  // its latency is a bit high
    EXPECT_EQ(fit.points(), 5);
    EXPECT_GT(fit.max_rel_error(), 0.0);
    EXPECT_LT(fit.max_rel_error(), 0.05) << op;
  }
}

TEST(CommFitTest, ACalibrationHasAFitPerCollectiveAndEachGraphPoint) {
  std::vector<CollectiveSample> samples = Line("nccl", "allreduce", 2, 8, 100);
  for (const CollectiveSample& s : Line("oneshot", "allgather", 2, 3, 50)) {
    samples.push_back(s);
  }
  CollectiveSample graph;
  graph.impl = "oneshot";
  graph.op = "reducescatter";
  graph.world = 2;
  graph.bytes = 12288;
  graph.in_graph = true;
  graph.time_us = 4.5;
  samples.push_back(graph);
  const std::vector<v1::CollectiveFit> fits = FitCalibration(samples);
  ASSERT_EQ(fits.size(), 3u);
  EXPECT_EQ(fits[0].allreduce(), "nccl");
  EXPECT_EQ(fits[0].op(), "allreduce");
  EXPECT_EQ(fits[1].allreduce(), "oneshot");
  EXPECT_EQ(fits[1].op(), "allgather");
  EXPECT_NEAR(fits[1].bus_gbps(), 50.0, 0.01);
  EXPECT_TRUE(fits[2].in_graph());
  EXPECT_EQ(fits[2].op(), "reducescatter");
  EXPECT_DOUBLE_EQ(fits[2].latency_us(), 4.5);
  EXPECT_EQ(fits[2].points(), 1);
}

// One rank moves nothing: latency only, no bandwidth.
TEST(CommFitTest, AWorldOfOneHasNoBandwidth) {
  const v1::CollectiveFit fit = FitStream(
      Line("nccl", "allreduce", 1, 2.0, 100.0), "nccl", "allreduce", 1);
  EXPECT_DOUBLE_EQ(fit.latency_us(), 2.0);
  EXPECT_EQ(fit.bus_gbps(), 0);
  EXPECT_EQ(fit.max_rel_error(), 0);
}

}  // namespace
}  // namespace moetune::comm
