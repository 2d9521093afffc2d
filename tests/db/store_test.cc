#include "db/store.h"

#include <bit>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "db/sqlite.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/db/store_test_util.h"

namespace moetune::db {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info =
        ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = ::testing::TempDir() + "moetune_store_" + info->name() + ".db";
    RemoveFiles();
    store_ = OpenStore();
  }
  void TearDown() override {
    store_.reset();
    RemoveFiles();
  }
  void RemoveFiles() {
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::remove((path_ + suffix).c_str());
    }
  }
  std::unique_ptr<Store> OpenStore() {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(store).value() : nullptr;
  }
  // A second connection on the same file, to look at the raw tables the way
  // an outside reader would (WAL lets it read while the store is open).
  int64_t Count(const std::string& sql) {
    absl::StatusOr<Connection> conn = Connection::Open(path_);
    EXPECT_TRUE(conn.ok()) << conn.status();
    absl::StatusOr<int64_t> value = conn->QueryInt64(sql);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? *value : -1;
  }
  // Creates a sweep of `trials`, returning its id; fills the trials' ids.
  int64_t Create(std::vector<v1::Trial>* trials, int64_t now = kT0,
                 const std::string& name = "s") {
    absl::StatusOr<int64_t> id =
        store_->CreateSweep(MakeSpec(name), trials, now);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : -1;
  }
  v1::Trial Get(int64_t trial_id) {
    absl::StatusOr<v1::Trial> trial = store_->GetTrial(trial_id);
    EXPECT_TRUE(trial.ok()) << trial.status();
    return trial.ok() ? *trial : v1::Trial();
  }
  std::vector<int64_t> Ids(const v1::TrialFilter& filter) {
    absl::StatusOr<std::vector<v1::Trial>> trials = store_->QueryTrials(filter);
    EXPECT_TRUE(trials.ok()) << trials.status();
    std::vector<int64_t> ids;
    if (trials.ok()) {
      for (const v1::Trial& t : *trials) ids.push_back(t.trial_id());
    }
    return ids;
  }

  std::string path_;
  std::unique_ptr<Store> store_;
};

// ------------------------------------------------------ opening, schema --

TEST_F(StoreTest, OpenAppliesEveryMigration) {
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(store_->SchemaVersion(), Store::LatestSchemaVersion());
  EXPECT_EQ(Count("PRAGMA user_version"), Store::LatestSchemaVersion());
}

TEST_F(StoreTest, ReopenKeepsDataAndDoesNotRerunMigrations) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h1")};
  const int64_t sweep_id = Create(&trials, kT0, "kept");
  store_.reset();
  // The v1 script uses plain CREATE TABLE: running it again would fail with
  // "table ... already exists", so a clean reopen shows it was skipped.
  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(store_->SchemaVersion(), Store::LatestSchemaVersion());
  absl::StatusOr<v1::Sweep> sweep = store_->GetSweep(sweep_id);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->name(), "kept");
  EXPECT_EQ(sweep->total_trials(), 1);
  EXPECT_EQ(Get(trials[0].trial_id()).config().moe_backend(), "a");
}

TEST_F(StoreTest, WalAndFullSyncAreInEffect) {
  absl::StatusOr<StoreSettings> settings = store_->Settings();
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->journal_mode, "wal");
  EXPECT_EQ(settings->synchronous, 2);  // FULL
  EXPECT_TRUE(settings->foreign_keys);
  EXPECT_EQ(settings->busy_timeout_ms, 5000);
  // WAL is a property of the file: another connection sees it too.
  absl::StatusOr<Connection> conn = Connection::Open(path_);
  ASSERT_TRUE(conn.ok());
  EXPECT_EQ(*conn->QueryText("PRAGMA journal_mode"), "wal");
}

TEST(StoreMemoryTest, InMemoryStoreWorks) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<StoreSettings> settings = (*store)->Settings();
  ASSERT_TRUE(settings.ok());
  EXPECT_EQ(settings->journal_mode, "memory");
  EXPECT_EQ(settings->synchronous, 2);
  std::vector<v1::Trial> trials = {MakeTrial("a", "h1")};
  absl::StatusOr<int64_t> id =
      (*store)->CreateSweep(MakeSpec("m"), &trials, kT0);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE((*store)->LeaseTrial(trials[0].trial_id(), "w", kT0 + 1).ok());
  absl::StatusOr<bool> recorded = (*store)->RecordResult(
      MakeResult(trials[0].trial_id(), 1, v1::DONE, 9), kT0 + 2);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_TRUE(*recorded);
  EXPECT_EQ((*store)->GetTrial(trials[0].trial_id())->state(), v1::DONE);
}

// ----------------------------------------------------------------- sweeps --

TEST_F(StoreTest, CreateSweepAssignsIdsAndCounts) {
  std::vector<v1::Trial> first = {MakeTrial("a", "h1"), MakeTrial("b", "h1"),
                                  MakeTrial("a", "h2")};
  EXPECT_EQ(Create(&first, kT0), 1);
  std::vector<v1::Trial> second = {MakeTrial("a", "h1"), MakeTrial("a", "h3")};
  EXPECT_EQ(Create(&second, kT0 + 5), 2);
  EXPECT_EQ(first[0].trial_id(), 1);
  EXPECT_EQ(first[2].trial_id(), 3);
  EXPECT_EQ(second[0].trial_id(), 4);
  EXPECT_EQ(second[1].trial_id(), 5);
  EXPECT_EQ(second[1].sweep_id(), 2);
  EXPECT_EQ(second[1].state(), v1::QUEUED);
  EXPECT_EQ(second[1].attempt(), 0);
  EXPECT_EQ(second[1].updated_at_unix_ms(), kT0 + 5);
  // A trial without measurement settings takes the spec's.
  EXPECT_EQ(second[1].measurement().iterations(), 20);

  absl::StatusOr<v1::Sweep> sweep = store_->GetSweep(1);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->sweep_id(), 1);
  EXPECT_EQ(sweep->name(), "s");
  EXPECT_EQ(sweep->spec().measurement().max_attempts(), 3);
  EXPECT_EQ(sweep->state(), v1::RUNNING);
  EXPECT_EQ(sweep->total_trials(), 3);
  EXPECT_THAT(sweep->trial_counts(), UnorderedElementsAre(Pair("QUEUED", 3)));
  EXPECT_EQ(sweep->created_at_unix_ms(), kT0);
  EXPECT_EQ(sweep->finished_at_unix_ms(), 0);

  const v1::Trial stored = Get(3);
  EXPECT_EQ(stored.sweep_id(), 1);
  EXPECT_EQ(stored.workload_hash(), "h2");
  EXPECT_EQ(stored.config().moe_backend(), "a");
  EXPECT_EQ(stored.workload().model_preset(), "tiny");
  EXPECT_EQ(stored.measurement().iterations(), 20);
  EXPECT_FALSE(stored.has_result());
}

TEST_F(StoreTest, CreateSweepRejectsAMissingWorkloadHash) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h1"), MakeTrial("a", "")};
  absl::StatusOr<int64_t> id = store_->CreateSweep(MakeSpec("x"), &trials, 0);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(id.status().message(), HasSubstr("trials[1].workload_hash"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sweeps"), 0);
  EXPECT_EQ(store_->CreateSweep(MakeSpec("x"), nullptr, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, GetSweepNotFoundNamesTheId) {
  absl::StatusOr<v1::Sweep> sweep = store_->GetSweep(42);
  ASSERT_FALSE(sweep.ok());
  EXPECT_EQ(sweep.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(sweep.status().message(), HasSubstr("sweep 42"));
}

TEST_F(StoreTest, ListSweepsNewestFirstWithLimit) {
  for (const char* name : {"one", "two", "three"}) {
    std::vector<v1::Trial> trials = {MakeTrial("a", "h")};
    Create(&trials, kT0, name);
  }
  absl::StatusOr<std::vector<v1::Sweep>> all = store_->ListSweeps(0);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].name(), "three");
  EXPECT_EQ((*all)[2].name(), "one");
  EXPECT_EQ((*all)[1].total_trials(), 1);
  absl::StatusOr<std::vector<v1::Sweep>> two = store_->ListSweeps(2);
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1].sweep_id(), 2);
  absl::StatusOr<std::vector<v1::Sweep>> bad = store_->ListSweeps(-1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("limit"));
}

TEST_F(StoreTest, SetSweepState) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h")};
  const int64_t id = Create(&trials);
  ASSERT_TRUE(store_->SetSweepState(id, v1::FINISHED, kT0 + 10).ok());
  EXPECT_EQ(store_->GetSweep(id)->state(), v1::FINISHED);
  EXPECT_EQ(store_->GetSweep(id)->finished_at_unix_ms(), kT0 + 10);
  ASSERT_TRUE(store_->SetSweepState(id, v1::RUNNING, kT0 + 20).ok());
  EXPECT_EQ(store_->GetSweep(id)->finished_at_unix_ms(), 0);
  absl::Status bad =
      store_->SetSweepState(id, v1::SWEEP_STATE_UNSPECIFIED, kT0);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("RUNNING, FINISHED, ABORTED"));
  EXPECT_EQ(store_->SetSweepState(99, v1::FINISHED, kT0).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, CancelSweepCancelsQueuedAndLeavesLeased) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h"), MakeTrial("a", "h"),
                                   MakeTrial("a", "h")};
  const int64_t id = Create(&trials);
  ASSERT_TRUE(store_->LeaseTrial(trials[1].trial_id(), "w1", kT0 + 1).ok());
  ASSERT_TRUE(store_->CancelSweep(id, kT0 + 2).ok());

  absl::StatusOr<v1::Sweep> sweep = store_->GetSweep(id);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->state(), v1::ABORTED);
  EXPECT_EQ(sweep->finished_at_unix_ms(), kT0 + 2);
  EXPECT_THAT(sweep->trial_counts(),
              UnorderedElementsAre(Pair("CANCELLED", 2), Pair("LEASED", 1)));
  const v1::Trial cancelled = Get(trials[0].trial_id());
  EXPECT_EQ(cancelled.state(), v1::CANCELLED);
  EXPECT_EQ(cancelled.reason(), "sweep cancelled");
  EXPECT_EQ(cancelled.updated_at_unix_ms(), kT0 + 2);
  EXPECT_EQ(store_->LeaseTrial(trials[0].trial_id(), "w1", kT0 + 3).code(),
            absl::StatusCode::kFailedPrecondition);

  // The running trial's worker reports that it stopped.
  absl::StatusOr<bool> recorded = store_->RecordResult(
      MakeResult(trials[1].trial_id(), 1, v1::CANCELLED, 0), kT0 + 4);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_EQ(Get(trials[1].trial_id()).state(), v1::CANCELLED);

  EXPECT_TRUE(store_->CancelSweep(id, kT0 + 9).ok());  // no-op
  EXPECT_EQ(store_->GetSweep(id)->finished_at_unix_ms(), kT0 + 2);
  EXPECT_EQ(store_->CancelSweep(77, kT0).code(), absl::StatusCode::kNotFound);
}

// A trial re-queued after its sweep was cancelled (its lease lost after the
// cancel) is closed by cancelling again, which keeps the sweep's end.
TEST_F(StoreTest, CancellingACancelledSweepClosesATrialLeftQueued) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h"), MakeTrial("a", "h")};
  const int64_t id = Create(&trials);
  ASSERT_TRUE(store_->LeaseTrial(trials[0].trial_id(), "w1", kT0 + 1).ok());
  ASSERT_TRUE(store_->CancelSweep(id, kT0 + 2).ok());
  ASSERT_TRUE(
      store_->RequeueTrial(trials[0].trial_id(), "lease lost", kT0 + 3).ok());
  ASSERT_EQ(Get(trials[0].trial_id()).state(), v1::QUEUED);

  ASSERT_TRUE(store_->CancelSweep(id, kT0 + 4).ok());
  const v1::Trial closed = Get(trials[0].trial_id());
  EXPECT_EQ(closed.state(), v1::CANCELLED);
  EXPECT_EQ(closed.reason(), "sweep cancelled");
  EXPECT_EQ(closed.updated_at_unix_ms(), kT0 + 4);
  EXPECT_EQ(Get(trials[1].trial_id()).updated_at_unix_ms(), kT0 + 2);
  EXPECT_EQ(store_->GetSweep(id)->finished_at_unix_ms(), kT0 + 2);
  EXPECT_EQ(store_->GetSweep(id)->state(), v1::ABORTED);
}

TEST_F(StoreTest, CancelFinishedSweepIsRefused) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h")};
  const int64_t id = Create(&trials);
  ASSERT_TRUE(store_->SetSweepState(id, v1::FINISHED, kT0).ok());
  absl::Status status = store_->CancelSweep(id, kT0);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("FINISHED"));
}

// ------------------------------------------------------ trial transitions --

TEST_F(StoreTest, LeaseRequeueFinishTransitions) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h")};
  Create(&trials);
  const int64_t id = trials[0].trial_id();

  ASSERT_TRUE(store_->LeaseTrial(id, "w1", kT0 + 1).ok());
  v1::Trial trial = Get(id);
  EXPECT_EQ(trial.state(), v1::LEASED);
  EXPECT_EQ(trial.attempt(), 1);
  EXPECT_EQ(trial.worker_id(), "w1");
  EXPECT_EQ(trial.updated_at_unix_ms(), kT0 + 1);

  absl::Status again = store_->LeaseTrial(id, "w2", kT0 + 2);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.message(), HasSubstr("is LEASED, not QUEUED"));

  ASSERT_TRUE(store_->RequeueTrial(id, "worker w1 went silent", kT0 + 3).ok());
  trial = Get(id);
  EXPECT_EQ(trial.state(), v1::QUEUED);
  EXPECT_EQ(trial.attempt(), 1);  // kept: it counts leases granted
  EXPECT_EQ(trial.reason(), "worker w1 went silent");
  EXPECT_EQ(trial.worker_id(), "w1");  // the last holder
  EXPECT_EQ(store_->RequeueTrial(id, "x", kT0 + 4).code(),
            absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(store_->LeaseTrial(id, "w2", kT0 + 5).ok());
  trial = Get(id);
  EXPECT_EQ(trial.attempt(), 2);
  EXPECT_EQ(trial.worker_id(), "w2");
  EXPECT_EQ(trial.reason(), "");

  ASSERT_TRUE(
      store_->FinishTrial(id, v1::FAILED, "lost 2 times", kT0 + 6).ok());
  trial = Get(id);
  EXPECT_EQ(trial.state(), v1::FAILED);
  EXPECT_EQ(trial.reason(), "lost 2 times");
  absl::Status final_again =
      store_->FinishTrial(id, v1::CANCELLED, "", kT0 + 7);
  EXPECT_EQ(final_again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(final_again.message(), HasSubstr("is FAILED"));
  EXPECT_EQ(store_->RequeueTrial(id, "", kT0).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(StoreTest, TransitionInputErrors) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h")};
  Create(&trials);
  const int64_t id = trials[0].trial_id();
  absl::Status missing = store_->LeaseTrial(404, "w1", kT0);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("trial 404"));
  EXPECT_EQ(store_->GetTrial(404).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->LeaseTrial(id, "", kT0).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status done = store_->FinishTrial(id, v1::DONE, "", kT0);
  EXPECT_EQ(done.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(done.message(), HasSubstr("FAILED, UNAVAILABLE, CANCELLED"));
  // UNAVAILABLE straight from QUEUED: no worker has the backend.
  ASSERT_TRUE(store_->FinishTrial(id, v1::UNAVAILABLE, "no sm_100", kT0).ok());
  EXPECT_EQ(Get(id).state(), v1::UNAVAILABLE);
}

// ---------------------------------------------------------------- results --

TEST_F(StoreTest, RecordResultIsIdempotentByTrialAndAttempt) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h")};
  Create(&trials);
  const int64_t id = trials[0].trial_id();
  ASSERT_TRUE(store_->LeaseTrial(id, "w1", kT0).ok());

  absl::StatusOr<bool> first =
      store_->RecordResult(MakeResult(id, 1, v1::DONE, 100), kT0 + 1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(*first);
  // The same report again, and a different one for the same pair.
  absl::StatusOr<bool> second =
      store_->RecordResult(MakeResult(id, 1, v1::DONE, 100), kT0 + 2);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(*second);
  absl::StatusOr<bool> third =
      store_->RecordResult(MakeResult(id, 1, v1::FAILED, 5), kT0 + 3);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(*third);

  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM fingerprints"), 1);
  const v1::Trial trial = Get(id);
  EXPECT_EQ(trial.state(), v1::DONE);
  EXPECT_EQ(trial.updated_at_unix_ms(), kT0 + 1);
  ASSERT_TRUE(trial.has_result());
  EXPECT_EQ(trial.result().stats().median_us(), 100);
  EXPECT_EQ(trial.result().fingerprint().hash(), "fp1");
}

TEST_F(StoreTest, RawSamplesAndColumnsRoundTripExactly) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h")};
  Create(&trials);
  const int64_t id = trials[0].trial_id();
  ASSERT_TRUE(store_->LeaseTrial(id, "w1", kT0).ok());
  v1::TrialResult result = MakeResult(id, 1, v1::DONE, 41.5);
  result.clear_samples_us();
  const std::vector<double> samples = {
      0.1,
      1.0 / 3.0,
      -0.0,
      std::numeric_limits<double>::denorm_min(),
      123456.789012345,
      41.5};
  for (double s : samples) result.add_samples_us(s);
  result.mutable_stats()->set_p99_us(77.25);
  result.mutable_roofline()->set_floor_us(3.2);
  result.mutable_roofline()->set_efficiency(3.2 / 41.5);
  result.set_max_rel_error(1.5e-3);
  ASSERT_TRUE(store_->RecordResult(result, kT0 + 1).ok());

  const v1::Trial trial = Get(id);
  ASSERT_EQ(trial.result().samples_us_size(), 6);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(std::bit_cast<uint64_t>(trial.result().samples_us(i)),
              std::bit_cast<uint64_t>(samples[i]))
        << "sample " << i;
  }
  EXPECT_EQ(trial.result().roofline().efficiency(), 3.2 / 41.5);
  EXPECT_EQ(trial.result().max_rel_error(), 1.5e-3);
  // The blob holds the samples once: 6 doubles of 8 bytes.
  EXPECT_EQ(Count("SELECT length(samples) FROM results"), 48);
  EXPECT_EQ(Count("SELECT p99_us = 77.25 AND floor_us = 3.2 AND "
                  "median_us = 41.5 AND fingerprint_hash = 'fp1' "
                  "FROM results"),
            1);
}

TEST_F(StoreTest, LateReportDoesNotOverrideTheState) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h")};
  Create(&trials);
  const int64_t id = trials[0].trial_id();
  ASSERT_TRUE(store_->LeaseTrial(id, "w1", kT0).ok());
  ASSERT_TRUE(store_->RequeueTrial(id, "w1 silent", kT0 + 1).ok());

  // Attempt 1 reports while the trial waits in the queue: kept, not applied.
  absl::StatusOr<bool> late =
      store_->RecordResult(MakeResult(id, 1, v1::FAILED, 0), kT0 + 2);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_TRUE(*late);
  EXPECT_EQ(Get(id).state(), v1::QUEUED);

  ASSERT_TRUE(store_->LeaseTrial(id, "w2", kT0 + 3).ok());
  ASSERT_TRUE(*store_->RecordResult(MakeResult(id, 2, v1::DONE, 50), kT0 + 4));
  v1::Trial trial = Get(id);
  EXPECT_EQ(trial.state(), v1::DONE);
  EXPECT_EQ(trial.result().attempt(), 2);

  // Never leased a third time: no such lease.
  absl::StatusOr<bool> bogus =
      store_->RecordResult(MakeResult(id, 3, v1::DONE, 1), kT0 + 5);
  EXPECT_EQ(bogus.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bogus.status().message(), HasSubstr("leased 2 time(s)"));

  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 2);
  trial = Get(id);
  EXPECT_EQ(trial.state(), v1::DONE);
  EXPECT_EQ(trial.updated_at_unix_ms(), kT0 + 4);
  EXPECT_EQ(trial.result().attempt(), 2);
  EXPECT_EQ(trial.result().stats().median_us(), 50);
}

TEST_F(StoreTest, ReportAfterAFinalStateIsKeptButIgnored) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h")};
  Create(&trials);
  const int64_t id = trials[0].trial_id();
  ASSERT_TRUE(store_->LeaseTrial(id, "w1", kT0).ok());
  ASSERT_TRUE(store_->FinishTrial(id, v1::FAILED, "lost", kT0 + 1).ok());
  absl::StatusOr<bool> late =
      store_->RecordResult(MakeResult(id, 1, v1::DONE, 10), kT0 + 2);
  ASSERT_TRUE(late.ok());
  EXPECT_TRUE(*late);
  const v1::Trial trial = Get(id);
  EXPECT_EQ(trial.state(), v1::FAILED);
  EXPECT_EQ(trial.reason(), "lost");
  EXPECT_EQ(trial.result().outcome(), v1::DONE);  // the record, not the state
  absl::StatusOr<std::vector<v1::Trial>> done =
      store_->DoneTrialsForWorkload("h");
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done->empty());
}

TEST_F(StoreTest, RecordResultInputErrors) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h")};
  Create(&trials);
  const int64_t id = trials[0].trial_id();
  absl::StatusOr<bool> r =
      store_->RecordResult(MakeResult(id, 0, v1::DONE, 1), kT0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("result.attempt"));
  r = store_->RecordResult(MakeResult(id, 1, v1::QUEUED, 1), kT0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              HasSubstr("allowed: DONE, FAILED, INCORRECT, TIMEOUT"));
  r = store_->RecordResult(MakeResult(0, 1, v1::DONE, 1), kT0);
  EXPECT_THAT(r.status().message(), HasSubstr("result.trial_id"));
  r = store_->RecordResult(MakeResult(999, 1, v1::DONE, 1), kT0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("trial 999"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
}

TEST_F(StoreTest, CorruptBlobIsDataLoss) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h")};
  Create(&trials);
  {
    absl::StatusOr<Connection> conn = Connection::Open(path_);
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE(conn->Exec("UPDATE trials SET config = x'0A'").ok());
  }
  absl::StatusOr<v1::Trial> trial = store_->GetTrial(trials[0].trial_id());
  EXPECT_EQ(trial.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(trial.status().message(), HasSubstr("config of trial 1"));
}

// ---------------------------------------------------------------- queries --

TEST_F(StoreTest, QueryTrialsFilters) {
  // Sweep 1: ids 1..4; sweep 2: ids 5..6.
  std::vector<v1::Trial> s1 = {MakeTrial("a", "h1"), MakeTrial("b", "h1"),
                               MakeTrial("a", "h2"), MakeTrial("b", "h2")};
  std::vector<v1::Trial> s2 = {MakeTrial("a", "h1"), MakeTrial("c", "h3")};
  Create(&s1);
  Create(&s2);
  ASSERT_TRUE(store_->LeaseTrial(2, "w", kT0).ok());
  ASSERT_TRUE(store_->LeaseTrial(5, "w", kT0).ok());
  ASSERT_TRUE(*store_->RecordResult(MakeResult(5, 1, v1::DONE, 7), kT0));

  v1::TrialFilter f;
  EXPECT_THAT(Ids(f), ElementsAre(1, 2, 3, 4, 5, 6));
  f.set_sweep_id(2);
  EXPECT_THAT(Ids(f), ElementsAre(5, 6));
  f.Clear();
  f.set_state(v1::LEASED);
  EXPECT_THAT(Ids(f), ElementsAre(2));
  f.Clear();
  f.set_moe_backend("a");
  EXPECT_THAT(Ids(f), ElementsAre(1, 3, 5));
  f.Clear();
  f.set_workload_hash("h1");
  EXPECT_THAT(Ids(f), ElementsAre(1, 2, 5));
  f.set_moe_backend("a");
  EXPECT_THAT(Ids(f), ElementsAre(1, 5));
  f.set_sweep_id(1);
  EXPECT_THAT(Ids(f), ElementsAre(1));
  f.Clear();
  f.set_state(v1::QUEUED);
  f.set_limit(2);
  EXPECT_THAT(Ids(f), ElementsAre(1, 3));
  f.Clear();
  f.set_moe_backend("zzz");
  EXPECT_THAT(Ids(f), ElementsAre());

  // Each trial comes with its result.
  f.Clear();
  f.set_state(v1::DONE);
  absl::StatusOr<std::vector<v1::Trial>> done = store_->QueryTrials(f);
  ASSERT_TRUE(done.ok());
  ASSERT_EQ(done->size(), 1u);
  EXPECT_EQ((*done)[0].result().stats().median_us(), 7);
  EXPECT_EQ((*done)[0].result().samples_us_size(), 3);

  f.Clear();
  f.set_state(static_cast<v1::TrialState>(99));
  absl::StatusOr<std::vector<v1::Trial>> bad = store_->QueryTrials(f);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("filter.state"));
  f.Clear();
  f.set_limit(-3);
  EXPECT_THAT(store_->QueryTrials(f).status().message(),
              HasSubstr("filter.limit"));
}

TEST_F(StoreTest, TrialsInStatesAndDoneTrialsForWorkload) {
  std::vector<v1::Trial> s1 = {MakeTrial("a", "h1"), MakeTrial("b", "h1"),
                               MakeTrial("a", "h2")};
  std::vector<v1::Trial> s2 = {MakeTrial("c", "h1")};
  Create(&s1);
  Create(&s2);
  for (int64_t id : {1, 2, 3, 4}) {
    ASSERT_TRUE(store_->LeaseTrial(id, "w", kT0).ok());
  }
  ASSERT_TRUE(*store_->RecordResult(MakeResult(1, 1, v1::DONE, 30), kT0));
  ASSERT_TRUE(*store_->RecordResult(MakeResult(2, 1, v1::INCORRECT, 9), kT0));
  ASSERT_TRUE(*store_->RecordResult(MakeResult(3, 1, v1::DONE, 20), kT0));
  ASSERT_TRUE(*store_->RecordResult(MakeResult(4, 1, v1::DONE, 10), kT0));

  absl::StatusOr<std::vector<v1::Trial>> done =
      store_->DoneTrialsForWorkload("h1");
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->size(), 2u);  // across both sweeps; INCORRECT left out
  EXPECT_EQ((*done)[0].trial_id(), 1);
  EXPECT_EQ((*done)[1].trial_id(), 4);
  EXPECT_EQ((*done)[1].result().stats().median_us(), 10);

  EXPECT_FALSE(store_->RequeueTrial(4, "x", kT0).ok());  // DONE is final
  std::vector<v1::Trial> s3 = {MakeTrial("a", "h9"), MakeTrial("a", "h9")};
  Create(&s3);  // ids 5, 6
  ASSERT_TRUE(store_->LeaseTrial(6, "w", kT0).ok());
  absl::StatusOr<std::vector<v1::Trial>> open =
      store_->TrialsInStates({v1::LEASED, v1::QUEUED});
  ASSERT_TRUE(open.ok()) << open.status();
  ASSERT_EQ(open->size(), 2u);
  EXPECT_EQ((*open)[0].trial_id(), 5);
  EXPECT_EQ((*open)[1].trial_id(), 6);
  EXPECT_EQ((*open)[1].state(), v1::LEASED);
  EXPECT_TRUE(store_->TrialsInStates({})->empty());
  absl::StatusOr<std::vector<v1::Trial>> bad =
      store_->TrialsInStates({v1::QUEUED, v1::TRIAL_STATE_UNSPECIFIED});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("states[1]"));
}

// ---------------------------------------------------------------- workers --

TEST_F(StoreTest, WorkersAndProbes) {
  ASSERT_TRUE(store_
                  ->UpsertWorker("w1", "host:0",
                                 MakeProbe({{"a", true}, {"b", false}}, kT0),
                                 kT0 + 1)
                  .ok());
  ASSERT_TRUE(
      store_->UpsertWorker("w0", "host:1", MakeProbe({{"a", true}}), kT0 + 2)
          .ok());
  absl::StatusOr<std::vector<v1::WorkerInfo>> workers = store_->ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->size(), 2u);
  EXPECT_EQ((*workers)[0].worker_id(), "w0");  // ordered by id
  EXPECT_EQ((*workers)[1].name(), "host:0");
  EXPECT_EQ((*workers)[1].last_heartbeat_unix_ms(), kT0 + 1);
  EXPECT_EQ((*workers)[1].probe().backends_size(), 2);
  EXPECT_FALSE((*workers)[1].alive());
  EXPECT_EQ((*workers)[1].current_trial_id(), 0);

  // Re-registration: new name and probe, registered_at kept.
  ASSERT_TRUE(store_
                  ->UpsertWorker("w1", "host:0b",
                                 MakeProbe({{"c", true}}, kT0 + 50), kT0 + 60)
                  .ok());
  absl::StatusOr<std::vector<v1::BackendProbe>> latest =
      store_->LatestProbes("w1");
  ASSERT_TRUE(latest.ok()) << latest.status();
  ASSERT_EQ(latest->size(), 1u);
  EXPECT_EQ((*latest)[0].name(), "c");
  EXPECT_EQ((*latest)[0].tiles(0).block_n(), 64);
  EXPECT_EQ(Count("SELECT registered_at FROM workers WHERE worker_id='w1'"),
            kT0 + 1);
  // History: 2 + 1 rows for w1 (probes 1 and 2), 1 for w0 (probed_at = now).
  EXPECT_EQ(Count("SELECT COUNT(*) FROM probes WHERE worker_id = 'w1'"), 3);
  EXPECT_EQ(Count("SELECT MAX(probe_no) FROM probes WHERE worker_id='w1'"), 2);
  EXPECT_EQ(Count("SELECT probed_at FROM probes WHERE worker_id = 'w0'"),
            kT0 + 2);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM probes WHERE available = 0 AND "
                  "reason LIKE 'needs sm_100+%'"),
            1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM fingerprints"), 1);

  ASSERT_TRUE(store_->TouchWorker("w1", kT0 + 99).ok());
  EXPECT_EQ(store_->ListWorkers()->at(1).last_heartbeat_unix_ms(), kT0 + 99);
  EXPECT_EQ(store_->ListWorkers()->at(1).name(), "host:0b");
  EXPECT_EQ(store_->TouchWorker("ghost", kT0).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->LatestProbes("ghost").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->UpsertWorker("", "x", v1::Probe(), kT0).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, ListWorkersShowsTheLeasedTrial) {
  ASSERT_TRUE(
      store_->UpsertWorker("w1", "h:0", MakeProbe({{"a", true}}), kT0).ok());
  std::vector<v1::Trial> trials = {MakeTrial("a", "h"), MakeTrial("a", "h")};
  Create(&trials);
  ASSERT_TRUE(store_->LeaseTrial(2, "w1", kT0).ok());
  EXPECT_EQ(store_->ListWorkers()->at(0).current_trial_id(), 2);
}

TEST_F(StoreTest, EmptyProbeReplacesTheLatest) {
  ASSERT_TRUE(
      store_->UpsertWorker("w1", "h:0", MakeProbe({{"a", true}}), kT0).ok());
  ASSERT_TRUE(store_->UpsertWorker("w1", "h:0", v1::Probe(), kT0 + 1).ok());
  EXPECT_TRUE(store_->LatestProbes("w1")->empty());
  // No fingerprint hash: the column is NULL, not a dangling ''.
  EXPECT_EQ(Count("SELECT fingerprint_hash IS NULL FROM workers"), 1);
}

// ------------------------------------------------------------- rollbacks --

TEST_F(StoreTest, FailedCreateSweepLeavesNothing) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h"), MakeTrial("b", "h"),
                                   MakeTrial("c", "h")};
  // The sweep row and the first trial are written, the second trial fails.
  store_->InjectFaultForTesting("INSERT INTO trials", /*skip=*/1);
  absl::StatusOr<int64_t> id = store_->CreateSweep(MakeSpec("x"), &trials, 0);
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.status().message(), HasSubstr("injected fault"));
  EXPECT_EQ(trials[0].trial_id(), 0);  // untouched on failure
  EXPECT_TRUE(store_->ListSweeps(0)->empty());
  EXPECT_TRUE(store_->QueryTrials(v1::TrialFilter())->empty());

  store_.reset();  // and nothing reached the file either
  store_ = OpenStore();
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sweeps"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM trials"), 0);
  // Even the AUTOINCREMENT counters were rolled back.
  EXPECT_EQ(Create(&trials), 1);
  EXPECT_EQ(trials[0].trial_id(), 1);
}

TEST_F(StoreTest, FailedRecordResultLeavesNothing) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h")};
  Create(&trials);
  ASSERT_TRUE(store_->LeaseTrial(1, "w1", kT0).ok());
  // The fingerprint is written first, then the result insert fails.
  store_->InjectFaultForTesting("INSERT INTO results");
  absl::StatusOr<bool> r =
      store_->RecordResult(MakeResult(1, 1, v1::DONE, 5), kT0 + 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM fingerprints"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(Get(1).state(), v1::LEASED);
  // The worker retries the report: it is not mistaken for a duplicate.
  r = store_->RecordResult(MakeResult(1, 1, v1::DONE, 5), kT0 + 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  EXPECT_EQ(Get(1).state(), v1::DONE);
}

TEST_F(StoreTest, FailedStateUpdateRollsBackTheResultToo) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h")};
  Create(&trials);
  ASSERT_TRUE(store_->LeaseTrial(1, "w1", kT0).ok());
  store_->InjectFaultForTesting("UPDATE trials SET state");
  EXPECT_FALSE(
      store_->RecordResult(MakeResult(1, 1, v1::DONE, 5), kT0 + 1).ok());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(Get(1).state(), v1::LEASED);
}

TEST_F(StoreTest, FailedCommitLeavesTheTrialAsItWas) {
  std::vector<v1::Trial> trials = {MakeTrial("a", "h"), MakeTrial("a", "h")};
  const int64_t id = Create(&trials);
  ASSERT_TRUE(store_->LeaseTrial(1, "w1", kT0).ok());
  store_->InjectFaultForTesting("COMMIT");
  EXPECT_FALSE(store_->CancelSweep(id, kT0 + 1).ok());
  EXPECT_EQ(Get(2).state(), v1::QUEUED);
  EXPECT_EQ(store_->GetSweep(id)->state(), v1::RUNNING);
  // The connection is usable afterwards.
  EXPECT_TRUE(store_->CancelSweep(id, kT0 + 2).ok());
  EXPECT_EQ(Get(2).state(), v1::CANCELLED);
}

// ------------------------------------------------------------ concurrency --

TEST_F(StoreTest, ConcurrentLeasesGrantEachTrialOnce) {
  constexpr int kTrials = 40;
  constexpr int kThreads = 4;
  std::vector<v1::Trial> trials;
  for (int i = 0; i < kTrials; ++i) trials.push_back(MakeTrial("a", "h"));
  Create(&trials);
  std::vector<int> granted(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t, &granted] {
      for (int64_t id = 1; id <= kTrials; ++id) {
        if (store_->LeaseTrial(id, "w" + std::to_string(t), kT0).ok()) {
          ++granted[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  int total = 0;
  for (int g : granted) total += g;
  EXPECT_EQ(total, kTrials);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM trials WHERE attempt = 1 AND "
                  "state = 2"),
            kTrials);
}

TEST_F(StoreTest, AddTrialsKeepsStrategyFieldsAndNeedsARunningSweep) {
  std::vector<v1::Trial> first = {MakeTrial("a", "h1")};
  const int64_t sweep_id = Create(&first);
  v1::Trial later = MakeTrial("b", "h1");
  later.set_rung(2);
  later.set_confirm_round(1);
  later.set_proposal_key("h1|b|2|1");
  std::vector<v1::Trial> added = {later};
  ASSERT_TRUE(store_->AddTrials(sweep_id, &added, kT0 + 1).ok());
  EXPECT_EQ(added[0].trial_id(), 2);
  const v1::Trial stored = Get(2);
  EXPECT_EQ(stored.rung(), 2);
  EXPECT_EQ(stored.confirm_round(), 1);
  EXPECT_EQ(stored.proposal_key(), "h1|b|2|1");
  EXPECT_EQ(stored.measurement().iterations(), 20);
  EXPECT_EQ(store_->GetSweep(sweep_id)->total_trials(), 2);
  EXPECT_EQ(store_->AddTrials(99, &added, kT0).code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(store_->SetSweepState(sweep_id, v1::FINISHED, kT0 + 2).ok());
  EXPECT_EQ(store_->AddTrials(sweep_id, &added, kT0).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(StoreTest, IncumbentIsTheLatestAcceptedBeforeASweep) {
  std::vector<v1::Trial> first = {MakeTrial("a", "h1"), MakeTrial("b", "h1")};
  Create(&first);  // sweep 1: trials 1, 2
  std::vector<v1::Trial> second = {MakeTrial("a", "h1")};
  Create(&second);  // sweep 2: trial 3
  ASSERT_TRUE(store_->SetIncumbent("h1", "fp", 1, kT0).ok());
  ASSERT_TRUE(store_->SetIncumbent("h1", "fp", 2, kT0 + 1).ok());
  ASSERT_TRUE(store_->SetIncumbent("h1", "fp-other", 1, kT0 + 1).ok());
  ASSERT_TRUE(store_->SetIncumbent("h1", "fp", 3, kT0 + 2).ok());
  auto ids = [](const std::vector<v1::Trial>& trials) {
    std::vector<int64_t> out;
    for (const v1::Trial& t : trials) out.push_back(t.trial_id());
    return out;
  };
  // Now: trial 3 for fp, trial 1 for fp-other.
  EXPECT_THAT(ids(*store_->Incumbents("h1")), ElementsAre(1, 3));
  // What sweep 2 had to beat: trial 2 (fp) and trial 1 (fp-other).
  EXPECT_THAT(ids(*store_->Incumbents("h1", 2)), ElementsAre(1, 2));
  EXPECT_TRUE(store_->Incumbents("h1", 1)->empty());
  EXPECT_TRUE(store_->Incumbents("h2")->empty());
}

}  // namespace
}  // namespace moetune::db
