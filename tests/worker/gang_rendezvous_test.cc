// The in-process GangRendezvous (threads as ranks): what code that meets its
// gang is tested with. Every rank gets every payload by rank; a torn-down
// gang aborts its waiters with the reason; a deadline is a deadline.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/in_process_gang_rendezvous.h"

namespace moetune::worker {
namespace {

using ::testing::ElementsAre;

TEST(InProcessGangRendezvousTest, EveryRankGetsEveryPayloadByRank) {
  constexpr int kWorld = 4;
  RendezvousHub hub(kWorld);
  std::vector<absl::StatusOr<std::vector<std::string>>> got(
      kWorld, absl::UnknownError("not run"));
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&hub, &got, r] {
      std::unique_ptr<GangRendezvous> rendezvous = hub.ForRank(r);
      // Rank 0 relays the id; the others post nothing.
      got[r] = rendezvous->AllGather("nccl-id", r == 0 ? "unique-id" : "",
                                     absl::Now() + absl::Seconds(10));
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const auto& answer : got) {
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_THAT(*answer, ElementsAre("unique-id", "", "", ""));
  }
}

TEST(InProcessGangRendezvousTest, TornDownMidWayAbortsTheWaiters) {
  RendezvousHub hub(3);
  std::vector<absl::Status> got(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&hub, &got, r] {
      got[r] = hub.ForRank(r)
                   ->AllGather("ipc-handles", absl::StrCat(r),
                               absl::Now() + absl::Seconds(10))
                   .status();
    });
  }
  hub.TearDown("rank 2 (worker w-2) went silent");  // rank 2 never posts
  for (std::thread& t : ranks) t.join();
  for (const absl::Status& status : got) {
    EXPECT_TRUE(absl::IsAborted(status)) << status;
    EXPECT_EQ(status.message(), "rank 2 (worker w-2) went silent");
  }
}

TEST(InProcessGangRendezvousTest, DeadlineAndRepeatedPosts) {
  RendezvousHub hub(2);
  std::unique_ptr<GangRendezvous> rank0 = hub.ForRank(0);
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      rank0->AllGather("k", "a", absl::Now()).status()));
  EXPECT_TRUE(
      absl::IsAlreadyExists(rank0->AllGather("k", "b", absl::Now()).status()));
  const auto both =
      hub.ForRank(1)->AllGather("k", "c", absl::Now() + absl::Seconds(1));
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_THAT(*both, ElementsAre("a", "c"));
}

}  // namespace
}  // namespace moetune::worker
