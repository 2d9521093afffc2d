// Listings in pages, submit request ids and stored worker identities.
#include <set>
#include <string>
#include <vector>

#include "db/paging.h"
#include "db/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/db/store_test_util.h"

namespace moetune::db {
namespace {

using ::testing::HasSubstr;

class StorePagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open(":memory:");
    ASSERT_TRUE(store.ok());
    store_ = *std::move(store);
  }
  // A sweep of `count` trials; returns its id.
  int64_t Sweep(int count, const std::string& request_id = "") {
    std::vector<v1::Trial> trials;
    for (int i = 0; i < count; ++i) trials.push_back(MakeTrial("a", "h"));
    auto id = store_->CreateSweep(MakeSpec("s"), &trials, kT0, request_id);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : -1;
  }
  // Follows QueryTrialPage to the end; returns the ids and the page count.
  std::pair<std::vector<int64_t>, int> AllPages(v1::TrialFilter filter) {
    std::vector<int64_t> ids;
    int pages = 0;
    do {
      auto page = store_->QueryTrialPage(filter);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      for (const v1::Trial& t : page->trials) ids.push_back(t.trial_id());
      filter.set_page_token(page->next_page_token);
      ++pages;
    } while (!filter.page_token().empty() && pages < 1000);
    return {ids, pages};
  }

  std::unique_ptr<Store> store_;
};

TEST_F(StorePagesTest, TrialPagesCoverEveryTrialOnce) {
  Sweep(25);
  v1::TrialFilter filter;
  filter.set_page_size(10);
  const auto [ids, pages] = AllPages(filter);
  EXPECT_EQ(ids.size(), 25u);
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), 25u);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_EQ(pages, 3);
}

TEST_F(StorePagesTest, ALimitHoldsAcrossPages) {
  Sweep(25);
  v1::TrialFilter filter;
  filter.set_page_size(10);
  filter.set_limit(13);
  const auto [ids, pages] = AllPages(filter);
  EXPECT_EQ(ids.size(), 13u);
  EXPECT_EQ(pages, 2);
}

TEST_F(StorePagesTest, SamplesOnlyWhenAskedFor) {
  Sweep(1);
  ASSERT_TRUE(store_->LeaseTrial(1, "w1", kT0).ok());
  ASSERT_TRUE(store_->RecordResult(MakeResult(1, 1, v1::DONE, 10), kT0).ok());
  v1::TrialFilter filter;
  auto lean = store_->QueryTrialPage(filter);
  ASSERT_TRUE(lean.ok());
  EXPECT_EQ(lean->trials[0].result().samples_us_size(), 0);
  EXPECT_EQ(lean->trials[0].result().stats().median_us(), 10);
  filter.set_include_samples(true);
  EXPECT_EQ(
      store_->QueryTrialPage(filter)->trials[0].result().samples_us_size(), 3);
}

TEST_F(StorePagesTest, BadSizesAndForeignTokensAreNamed) {
  Sweep(3);
  v1::TrialFilter filter;
  filter.set_page_size(kMaxTrialPage + 1);
  EXPECT_THAT(std::string(store_->QueryTrialPage(filter).status().message()),
              HasSubstr("filter.page_size"));
  filter.set_page_size(0);
  filter.set_page_token("garbage");
  EXPECT_THAT(std::string(store_->QueryTrialPage(filter).status().message()),
              HasSubstr("filter.page_token"));
  // A sweep listing's token is not a trial listing's.
  filter.set_page_token(PageToken('s', 1, 0));
  EXPECT_EQ(store_->QueryTrialPage(filter).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StorePagesTest, SweepPagesAreNewestFirst) {
  for (int i = 0; i < 5; ++i) Sweep(1);
  auto first = store_->ListSweepPage(0, 2, "");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->sweeps.size(), 2u);
  EXPECT_EQ(first->sweeps[0].sweep_id(), 5);
  auto second = store_->ListSweepPage(0, 2, first->next_page_token);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->sweeps[0].sweep_id(), 3);
  auto third = store_->ListSweepPage(0, 2, second->next_page_token);
  ASSERT_EQ(third->sweeps.size(), 1u);
  EXPECT_TRUE(third->next_page_token.empty());
  auto limited = store_->ListSweepPage(3, 2, "");
  auto rest = store_->ListSweepPage(3, 2, limited->next_page_token);
  EXPECT_EQ(rest->sweeps.size(), 1u);
  EXPECT_TRUE(rest->next_page_token.empty());
}

TEST_F(StorePagesTest, ARequestIdNamesOneSweep) {
  const int64_t id = Sweep(2, "req-7");
  EXPECT_EQ(*store_->SweepForRequest("req-7"), id);
  EXPECT_FALSE(store_->SweepForRequest("req-8")->has_value());
  std::vector<v1::Trial> trials = {MakeTrial("a", "h")};
  auto twin = store_->CreateSweep(MakeSpec("s"), &trials, kT0, "req-7");
  EXPECT_EQ(twin.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->ListSweeps(0)->size(), 1u);  // nothing half-written
  EXPECT_EQ(trials[0].trial_id(), 0);
  Sweep(1);  // sweeps without a request id do not collide
  Sweep(1);
}

TEST_F(StorePagesTest, WorkerIdentitiesKeepTheTokenDigest) {
  ASSERT_TRUE(store_->UpsertWorker("w:a/1", "a", v1::Probe(), kT0, "d1").ok());
  ASSERT_TRUE(
      store_->UpsertWorker("w:b/2", "b", v1::Probe(), kT0 + 5000, "d2").ok());
  auto recent = store_->WorkerIdentities(kT0 + 1000);
  ASSERT_TRUE(recent.ok()) << recent.status();
  ASSERT_EQ(recent->size(), 1u);
  EXPECT_EQ((*recent)[0].worker_id, "w:b/2");
  EXPECT_EQ((*recent)[0].token_sha256, "d2");
  ASSERT_TRUE(store_->TouchWorker("w:a/1", kT0 + 6000).ok());
  EXPECT_EQ(store_->WorkerIdentities(kT0 + 1000)->size(), 2u);
}

TEST_F(StorePagesTest, FinalTrialsSinceIsWhatAWatcherHasNotSeen) {
  const int64_t sweep = Sweep(3);
  ASSERT_TRUE(store_->LeaseTrial(1, "w1", kT0 + 10).ok());
  ASSERT_TRUE(
      store_->RecordResult(MakeResult(1, 1, v1::DONE, 10), kT0 + 20).ok());
  ASSERT_TRUE(store_->LeaseTrial(2, "w1", kT0 + 30).ok());
  ASSERT_TRUE(
      store_->RecordResult(MakeResult(2, 1, v1::DONE, 11), kT0 + 40).ok());
  auto since = store_->FinalTrialsSince(sweep, kT0 + 30);
  ASSERT_TRUE(since.ok()) << since.status();
  ASSERT_EQ(since->size(), 1u);
  EXPECT_EQ((*since)[0].trial_id(), 2);
  EXPECT_EQ((*since)[0].result().samples_us_size(), 0);
  EXPECT_EQ(store_->FinalTrialsSince(sweep, 0)->size(), 2u);
}

}  // namespace
}  // namespace moetune::db
