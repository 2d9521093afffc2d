// The gang's rendezvous in process: W threads as the ranks of a gang the
// Scheduler formed, posting under a key and getting every rank's payload; a
// gang torn down mid-way; the refusals.
#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/test_helpers.h"

namespace moetune::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Worker {
  std::string id;
  std::string token;
};

class RendezvousTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *db::Store::Open(":memory:");
    registry_ = std::make_unique<WorkerRegistry>(&clock_, 1000);
    scheduler_ = std::make_unique<Scheduler>(
        store_.get(), registry_.get(), &clock_, SchedulerOptions{1000, 100, 0});
  }
  // A gang of `world` GPU workers on one host, every grant picked up.
  void FormGang(int world) {
    v1::Probe probe = CpuWorkerProbe();
    probe.mutable_device()->set_is_gpu(true);
    probe.mutable_device()->set_host_id("host-a");
    probe.mutable_backends(2)->set_available(true);  // fused_gemv
    for (int r = 0; r < world; ++r) {
      v1::RegisterWorkerRequest request;
      request.set_name(absl::StrCat("host-a:", r));
      *request.mutable_probe() = probe;
      const auto registered = scheduler_->RegisterWorker(request);
      ASSERT_TRUE(registered.ok());
      workers_.push_back({registered->worker_id(), registered->token()});
      ASSERT_FALSE(Acquire(workers_.back()).granted());  // idle
    }
    v1::SweepSpec spec;
    spec.mutable_workload()->set_model_preset("tiny");
    spec.mutable_workload()->add_batch_sizes(1);
    spec.mutable_workload()->add_context_lengths(16);
    spec.mutable_workload()->set_region(v1::MOE_LAYER);
    spec.mutable_space()->add_moe_backends("fused_gemv");
    spec.mutable_space()->add_tp(2);
    spec.mutable_space()->add_ep(world / 2);
    spec.mutable_space()->add_communication(v1::MEASURED);
    ASSERT_TRUE(scheduler_->Submit(spec).ok());
    // Rank 0 is the worker that asks; the others are longest waiting first.
    const v1::AcquireTrialResponse first = Acquire(workers_[0]);
    ASSERT_TRUE(first.granted());
    gang_ = first.gang();
    trial_id_ = first.trial().trial_id();
    std::vector<Worker> by_rank(world);
    for (const Worker& w : workers_) {
      const int rank =
          static_cast<int>(std::find(gang_.worker_ids().begin(),
                                     gang_.worker_ids().end(), w.id) -
                           gang_.worker_ids().begin());
      by_rank[rank] = w;
      if (rank != 0) ASSERT_TRUE(Acquire(w).granted());
    }
    workers_ = by_rank;
  }
  v1::AcquireTrialResponse Acquire(const Worker& w) {
    return *scheduler_->Acquire(w.id, w.token);
  }
  v1::RendezvousRequest Post(int rank, const std::string& key,
                             const std::string& payload, int wait_ms) {
    v1::RendezvousRequest request;
    request.set_worker_id(workers_[rank].id);
    request.set_token(workers_[rank].token);
    request.set_gang_id(gang_.gang_id());
    request.set_key(key);
    request.set_rank(rank);
    request.set_payload(payload);
    request.set_wait_ms(wait_ms);
    return request;
  }
  // Every rank in a thread of its own; the answers by rank.
  std::vector<absl::StatusOr<v1::RendezvousResponse>> AllGather(
      const std::string& key, int ranks) {
    std::vector<absl::StatusOr<v1::RendezvousResponse>> answers(
        ranks, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([this, r, key, &answers] {
        answers[r] = scheduler_->Rendezvous(
            Post(r, key, absl::StrCat("payload of rank ", r), 10000));
      });
    }
    for (std::thread& t : threads) t.join();
    return answers;
  }

  FakeClock clock_;
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<Worker> workers_;  // by rank once the gang is formed
  v1::Gang gang_;
  int64_t trial_id_ = 0;
};

TEST_F(RendezvousTest, EveryRankGetsEveryPayloadByRank) {
  FormGang(4);
  for (const std::string key : {"nccl-id", "ipc-handles"}) {
    for (const auto& answer : AllGather(key, 4)) {
      ASSERT_TRUE(answer.ok()) << answer.status();
      EXPECT_TRUE(answer->complete());
      EXPECT_THAT(answer->payloads(),
                  ElementsAre("payload of rank 0", "payload of rank 1",
                              "payload of rank 2", "payload of rank 3"));
    }
  }
}

TEST_F(RendezvousTest, NotYetCompleteWhenTheWaitEnds) {
  FormGang(2);
  const auto alone = scheduler_->Rendezvous(Post(0, "k", "a", 0));
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_FALSE(alone->complete());
  EXPECT_FALSE(alone->torn_down());
  // Posting the same bytes again is idempotent; the other rank completes.
  ASSERT_TRUE(scheduler_->Rendezvous(Post(0, "k", "a", 0)).ok());
  const auto both = scheduler_->Rendezvous(Post(1, "k", "b", 0));
  ASSERT_TRUE(both.ok());
  EXPECT_TRUE(both->complete());
  EXPECT_THAT(both->payloads(), ElementsAre("a", "b"));
}

// Three of four ranks wait for the fourth, whose worker registers again:
// the gang is torn down, and every waiter (or late arrival) is told why.
TEST_F(RendezvousTest, TornDownMidWayWakesTheWaiters) {
  FormGang(4);
  std::vector<absl::StatusOr<v1::RendezvousResponse>> answers;
  std::thread waiters([&] { answers = AllGather("nccl-id", 3); });
  v1::RegisterWorkerRequest again;
  again.set_name("host-a:3");
  again.set_previous_worker_id(workers_[3].id);
  again.set_previous_token(workers_[3].token);
  ASSERT_TRUE(scheduler_->RegisterWorker(again).ok());
  waiters.join();
  for (const auto& answer : answers) {
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_TRUE(answer->torn_down());
    EXPECT_FALSE(answer->complete());
    EXPECT_THAT(answer->reason(), HasSubstr("rank 3 (worker "));
  }
  EXPECT_EQ(store_->GetTrial(trial_id_)->state(), v1::QUEUED);
}

TEST_F(RendezvousTest, RefusesStrangersBadTokensAndUnknownGangs) {
  FormGang(2);
  v1::RendezvousRequest wrong_rank = Post(0, "k", "a", 0);
  wrong_rank.set_rank(1);
  EXPECT_EQ(scheduler_->Rendezvous(wrong_rank).status().code(),
            absl::StatusCode::kPermissionDenied);
  v1::RendezvousRequest bad_token = Post(0, "k", "a", 0);
  bad_token.set_token("forged");
  EXPECT_EQ(scheduler_->Rendezvous(bad_token).status().code(),
            absl::StatusCode::kUnauthenticated);
  v1::RendezvousRequest unknown = Post(0, "k", "a", 0);
  unknown.set_gang_id("trial-99-attempt-1");
  const auto refused = scheduler_->Rendezvous(unknown);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("gang_id: 'trial-99-attempt-1' is not a gang"));
  v1::RendezvousRequest out_of_range = Post(0, "k", "a", 0);
  out_of_range.set_rank(2);
  EXPECT_THAT(
      std::string(scheduler_->Rendezvous(out_of_range).status().message()),
      HasSubstr("rank: 2 is out of range; allowed: 0..1"));
  ASSERT_TRUE(scheduler_->Rendezvous(Post(0, "k", "a", 0)).ok());
  EXPECT_EQ(
      scheduler_->Rendezvous(Post(0, "k", "different", 0)).status().code(),
      absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace moetune::coordinator
