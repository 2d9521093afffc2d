// kernels/cuda/comm/comm_gpu.h: the gang's sums on the GPU. On one device: NCCL
// at world 1 through the same set-up a gang uses (an id, the rendezvous, a
// non-blocking communicator under a deadline), in a stream and in a CUDA
// graph; the one-shot all-reduce with several ranks on the device (its
// synchronisation across many calls and graph replays, bit-identical sums
// in rank order), through IPC at world 1, and a peer that never comes
// reported within the deadline; data-parallel attention's all-gather and
// reduce-scatter, exact, at world 1 (both kinds) and with two one-shot
// ranks on the device. GPU cases skip without a device.
#include "kernels/cuda/comm/comm_gpu.h"

#include <barrier>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace moetune::gpu {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

// The rendezvous of a gang of one: every offer comes back as the only one.
bool Alone(const std::string&, const std::string& mine,
           std::vector<std::string>* all, std::string*) {
  *all = {mine};
  return true;
}

std::unique_ptr<GangComm> WorldOne(AllReduceImpl impl) {
  std::string id, error;
  EXPECT_EQ(NewNcclId(&id, &error), RunStatus::kOk) << error;
  GangCommSetup setup;
  setup.nccl_id = id;
  setup.impl = impl;
  setup.timeout_ms = 30000;
  auto comm = CreateGangComm(setup, Alone, &error);
  EXPECT_NE(comm, nullptr) << error;
  return comm;
}

TEST(CommGpuTest, ParsesTheImplementationNames) {
  AllReduceImpl impl;
  EXPECT_TRUE(ParseAllReduceImpl("", &impl));
  EXPECT_EQ(impl, AllReduceImpl::kNccl);
  EXPECT_TRUE(ParseAllReduceImpl("oneshot", &impl));
  EXPECT_EQ(impl, AllReduceImpl::kOneShot);
  EXPECT_FALSE(ParseAllReduceImpl("ring", &impl));
  EXPECT_STREQ(AllReduceImplName(AllReduceImpl::kOneShot), "oneshot");
}

TEST(CommGpuTest, ARankOutsideTheWorldIsRefusedNamingIt) {
  GangCommSetup setup;
  setup.rank = 3;
  setup.world = 2;
  std::string error;
  EXPECT_EQ(CreateGangComm(setup, Alone, &error), nullptr);
  EXPECT_NE(error.find("rank 3 of world 2"), std::string::npos) << error;
}

TEST(CommGpuTest, NcclAtWorldOneSumsInAStreamAndInAGraph) {
  SKIP_WITHOUT_GPU();
  auto comm = WorldOne(AllReduceImpl::kNccl);
  ASSERT_NE(comm, nullptr);
  for (bool graph : {false, true}) {
    AllReduceTiming timing;
    std::string error;
    ASSERT_EQ(
        TimeAllReduce(comm.get(), 3072, 2, 10, graph, nullptr, &timing, &error),
        RunStatus::kOk)
        << error;
    EXPECT_EQ(timing.wrong, 0);
    EXPECT_GT(timing.time_us, 0);
  }
}

TEST(CommGpuTest, OneShotAtWorldOneMapsItsBufferThroughTheRendezvous) {
  SKIP_WITHOUT_GPU();
  auto comm = WorldOne(AllReduceImpl::kOneShot);
  ASSERT_NE(comm, nullptr);
  AllReduceTiming timing;
  std::string error;
  ASSERT_EQ(
      TimeAllReduce(comm.get(), 6144, 2, 10, true, nullptr, &timing, &error),
      RunStatus::kOk)
      << error;
  EXPECT_EQ(timing.wrong, 0);
}

// Data-parallel attention's all-gather and reduce-scatter at world 1,
// NCCL's and the one-shot kernel's, in a stream and in a graph: exact.
TEST(CommGpuTest, GathersAndScattersAtWorldOneAreExact) {
  SKIP_WITHOUT_GPU();
  for (AllReduceImpl impl : {AllReduceImpl::kNccl, AllReduceImpl::kOneShot}) {
    auto comm = WorldOne(impl);
    ASSERT_NE(comm, nullptr);
    for (CollectiveOp op :
         {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
      for (bool graph : {false, true}) {
        AllReduceTiming timing;
        std::string error;
        ASSERT_EQ(TimeCollective(comm.get(), op, 3072, 2, 10, graph, nullptr,
                                 &timing, &error),
                  RunStatus::kOk)
            << AllReduceImplName(impl) << ": " << error;
        EXPECT_EQ(timing.wrong, 0) << AllReduceImplName(impl);
        EXPECT_GT(timing.time_us, 0);
      }
    }
  }
}

// Every rank on a thread of its own, as ranks in processes would be.
void TimeOnEveryRank(std::vector<std::unique_ptr<GangComm>>& gang,
                     int64_t floats, bool graph,
                     std::vector<AllReduceTiming>* timings,
                     std::vector<std::string>* errors,
                     CollectiveOp op = CollectiveOp::kAllReduce) {
  timings->assign(gang.size(), {});
  errors->assign(gang.size(), "");
  std::vector<std::thread> threads;
  std::barrier meet(static_cast<std::ptrdiff_t>(gang.size()));
  for (size_t r = 0; r < gang.size(); ++r) {
    threads.emplace_back([&, r] {
      TimeCollective(
          gang[r].get(), op, floats, 3, 40, graph,
          [&] { meet.arrive_and_wait(); }, &(*timings)[r], &(*errors)[r]);
    });
  }
  for (std::thread& t : threads) t.join();
}

// Two ranks as threads of this process on one device. CUDA does not promise
// that kernels of two streams run at once, and a one-shot kernel spins for
// its peers: at four ranks in one process they can starve, so four ranks
// are checked as processes, as the product's gangs run
// (step_gang_gpu_test).
TEST(CommGpuTest, OneShotRanksOnOneDeviceAgreeOverManyCallsAndReplays) {
  SKIP_WITHOUT_GPU();
  for (int world : {2}) {
    std::string error;
    auto gang = CreateLocalGang(std::vector<int>(world, 0),
                                AllReduceImpl::kOneShot, 1 << 20, &error);
    ASSERT_EQ(gang.size(), static_cast<size_t>(world)) << error;
    // Sizes below, at and above one element a block and thread.
    for (int64_t floats : {1, 31, 6144, 12289, 1 << 20}) {
      for (bool graph : {false, true}) {
        std::vector<AllReduceTiming> timings;
        std::vector<std::string> errors;
        TimeOnEveryRank(gang, floats, graph, &timings, &errors);
        for (int r = 0; r < world; ++r) {
          EXPECT_EQ(errors[r], "") << "world " << world << " rank " << r;
          EXPECT_EQ(timings[r].wrong, 0)
              << "world " << world << " rank " << r << " floats " << floats;
        }
      }
    }
  }
}

// The one-shot reduce-scatter and all-gather with two ranks on the device:
// every rank's part from every rank, exact, over many calls and replays.
TEST(CommGpuTest, OneShotRanksOnOneDeviceGatherAndScatterExactly) {
  SKIP_WITHOUT_GPU();
  std::string error;
  auto gang = CreateLocalGang({0, 0}, AllReduceImpl::kOneShot, 1 << 20, &error);
  ASSERT_EQ(gang.size(), 2u) << error;
  for (CollectiveOp op :
       {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
    for (int64_t floats : {1, 31, 6144, 12289, 1 << 19}) {
      for (bool graph : {false, true}) {
        std::vector<AllReduceTiming> timings;
        std::vector<std::string> errors;
        TimeOnEveryRank(gang, floats, graph, &timings, &errors, op);
        for (int r = 0; r < 2; ++r) {
          EXPECT_EQ(errors[r], "") << "rank " << r;
          EXPECT_EQ(timings[r].wrong, 0) << "rank " << r << " floats " << floats
                                         << " op " << static_cast<int>(op);
        }
      }
    }
  }
}

TEST(CommGpuTest, NcclRefusesTwoRanksOnOneDeviceWithTheReason) {
  SKIP_WITHOUT_GPU();
  std::string error;
  auto gang = CreateLocalGang({0, 0}, AllReduceImpl::kNccl, 1024, &error);
  EXPECT_TRUE(gang.empty());
  EXPECT_NE(error.find("two ranks on one device"), std::string::npos) << error;
}

TEST(CommGpuTest, AOneShotPeerThatNeverComesIsReportedNotAHang) {
  SKIP_WITHOUT_GPU();
  std::string error;
  auto gang = CreateLocalGang({0, 0}, AllReduceImpl::kOneShot, 1024, &error);
  ASSERT_EQ(gang.size(), 2u) << error;
  AllReduceTiming timing;
  // Rank 1 never calls: rank 0's kernel gives up after its deadline.
  EXPECT_NE(
      TimeAllReduce(gang[0].get(), 256, 0, 1, false, nullptr, &timing, &error),
      RunStatus::kOk);
  EXPECT_NE(error.find("did not arrive"), std::string::npos) << error;
}

}  // namespace
}  // namespace moetune::gpu
