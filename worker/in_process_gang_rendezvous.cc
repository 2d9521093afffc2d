#include "worker/in_process_gang_rendezvous.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace moetune::worker {
namespace {

class RankView final : public GangRendezvous {
 public:
  RankView(RendezvousHub* hub, int rank) : hub_(hub), rank_(rank) {}
  absl::StatusOr<std::vector<std::string>> AllGather(
      const std::string& key, const std::string& payload,
      absl::Time deadline) override {
    return hub_->AllGather(rank_, key, payload, deadline);
  }

 private:
  RendezvousHub* hub_;
  const int rank_;
};

}  // namespace

std::unique_ptr<GangRendezvous> RendezvousHub::ForRank(int rank) {
  return std::make_unique<RankView>(this, rank);
}

void RendezvousHub::TearDown(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  torn_down_ = reason;
  posts_.clear();
}

bool RendezvousHub::Settled(const std::string& key) const {
  if (torn_down_.has_value()) return true;
  auto it = posts_.find(key);
  return it != posts_.end() &&
         std::all_of(it->second.begin(), it->second.end(),
                     [](const auto& p) { return p.has_value(); });
}

absl::StatusOr<std::vector<std::string>> RendezvousHub::AllGather(
    int rank, const std::string& key, const std::string& payload,
    absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (torn_down_.has_value()) return absl::AbortedError(*torn_down_);
  std::vector<std::optional<std::string>>& posts = posts_[key];
  posts.resize(world_);
  if (posts[rank].has_value() && *posts[rank] != payload) {
    return absl::AlreadyExistsError(
        absl::StrCat("rank ", rank,
                     " already posted a different payload under '", key, "'"));
  }
  posts[rank] = payload;
  const auto settled = [this, &key]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return Settled(key);
  };
  mu_.AwaitWithDeadline(absl::Condition(&settled), deadline);
  if (torn_down_.has_value()) return absl::AbortedError(*torn_down_);
  if (!Settled(key)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "rendezvous '", key, "': not every rank posted by the deadline"));
  }
  std::vector<std::string> all;
  for (const std::optional<std::string>& p : posts_[key]) all.push_back(*p);
  return all;
}

}  // namespace moetune::worker
