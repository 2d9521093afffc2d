#include "coordinator/gangs.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tuner/config_key.h"

namespace moetune::coordinator {

int GangWorld(const v1::TrialConfig& config) {
  if (!tuner::IsMeasured(config)) return 0;
  // A measured world of one is a gang of one: the same path, NCCL at world 1.
  return std::max(1, config.tp()) * std::max(1, config.ep());
}

int GangView::RankOf(const std::string& worker_id) const {
  for (size_t r = 0; r < worker_ids.size(); ++r) {
    if (worker_ids[r] == worker_id) return static_cast<int>(r);
  }
  return -1;
}

struct GangTable::Gang {
  GangView view;
  std::vector<std::optional<v1::TrialResult>> results;  // DONE, by rank
  // Per key, each rank's payload once posted.
  std::map<std::string, std::vector<std::optional<std::string>>> posts;
  bool ended = false;
  std::string end_reason;

  bool AllPosted(const std::string& key) const {
    auto it = posts.find(key);
    if (it == posts.end()) return false;
    return std::all_of(it->second.begin(), it->second.end(),
                       [](const auto& p) { return p.has_value(); });
  }
};

v1::Gang GangTable::Form(int64_t trial_id, int attempt,
                         const std::vector<std::string>& worker_ids,
                         const std::string& asker, int64_t now_ms) {
  auto gang = std::make_shared<Gang>();
  const size_t world = worker_ids.size();
  // Unique per (trial, attempt): attempts only grow, across restarts too.
  gang->view.gang_id = absl::StrCat("trial-", trial_id, "-attempt-", attempt);
  gang->view.trial_id = trial_id;
  gang->view.attempt = attempt;
  gang->view.worker_ids = worker_ids;
  gang->view.picked_up.assign(world, false);
  gang->view.picked_up_ms.assign(world, 0);
  gang->view.done.assign(world, false);
  gang->view.formed_ms = now_ms;
  gang->results.resize(world);
  // The worker that asked, when a member, is rank 0: its grant is the
  // answer to its call.
  if (worker_ids[0] == asker) {
    gang->view.picked_up[0] = true;
    gang->view.picked_up_ms[0] = now_ms;
  }
  v1::Gang proto;
  proto.set_gang_id(gang->view.gang_id);
  proto.set_world_size(static_cast<int32_t>(world));
  for (const std::string& id : worker_ids) proto.add_worker_ids(id);
  absl::MutexLock lock(&mu_);
  gang_of_trial_[trial_id] = gang->view.gang_id;
  gangs_[gang->view.gang_id] = std::move(gang);
  return proto;
}

std::optional<std::pair<int64_t, v1::Gang>> GangTable::TakeGrant(
    const std::string& worker_id, int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, gang] : gangs_) {
    const int rank = gang->view.RankOf(worker_id);
    if (rank < 0 || gang->view.picked_up[rank]) continue;
    gang->view.picked_up[rank] = true;
    gang->view.picked_up_ms[rank] = now_ms;
    v1::Gang proto;
    proto.set_gang_id(id);
    proto.set_rank(rank);
    proto.set_world_size(static_cast<int32_t>(gang->view.worker_ids.size()));
    for (const std::string& w : gang->view.worker_ids) proto.add_worker_ids(w);
    return std::make_pair(gang->view.trial_id, proto);
  }
  return std::nullopt;
}

bool GangTable::Holds(const std::string& worker_id) const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [id, gang] : gangs_) {
    const int rank = gang->view.RankOf(worker_id);
    if (rank >= 0 && !gang->view.done[rank]) return true;
  }
  return false;
}

std::shared_ptr<GangTable::Gang> GangTable::FindLocked(int64_t trial_id) const {
  auto it = gang_of_trial_.find(trial_id);
  if (it == gang_of_trial_.end()) return nullptr;
  auto gang = gangs_.find(it->second);
  return gang == gangs_.end() ? nullptr : gang->second;
}

bool GangTable::Runs(int64_t trial_id, const std::string& worker_id) const {
  absl::ReaderMutexLock lock(&mu_);
  const std::shared_ptr<Gang> gang = FindLocked(trial_id);
  if (gang == nullptr) return false;
  const int rank = gang->view.RankOf(worker_id);
  return rank >= 0 && gang->view.picked_up[rank] && !gang->view.done[rank];
}

std::optional<GangView> GangTable::OfTrial(int64_t trial_id) const {
  absl::ReaderMutexLock lock(&mu_);
  const std::shared_ptr<Gang> gang = FindLocked(trial_id);
  if (gang == nullptr) return std::nullopt;
  return gang->view;
}

bool GangTable::NoteDone(int64_t trial_id, int rank,
                         const v1::TrialResult& result) {
  absl::MutexLock lock(&mu_);
  const std::shared_ptr<Gang> gang = FindLocked(trial_id);
  if (gang == nullptr || rank < 0 ||
      rank >= static_cast<int>(gang->results.size())) {
    return false;
  }
  gang->view.done[rank] = true;
  if (!gang->results[rank].has_value()) gang->results[rank] = result;
  return std::all_of(gang->view.done.begin(), gang->view.done.end(),
                     [](bool done) { return done; });
}

std::optional<v1::TrialResult> GangTable::RankZeroResult(
    int64_t trial_id) const {
  absl::ReaderMutexLock lock(&mu_);
  const std::shared_ptr<Gang> gang = FindLocked(trial_id);
  if (gang == nullptr) return std::nullopt;
  return gang->results[0];
}

void GangTable::End(int64_t trial_id, const std::string& reason,
                    int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  const std::shared_ptr<Gang> gang = FindLocked(trial_id);
  if (gang == nullptr) return;
  // Waiters hold the gang until they wake: `ended` is what they look at
  // first, so the posts can go now.
  gang->ended = true;
  gang->end_reason = reason;
  gang->posts.clear();
  ended_[gang->view.gang_id] = Tombstone{reason, now_ms};
  gangs_.erase(gang->view.gang_id);
  gang_of_trial_.erase(trial_id);
}

void GangTable::Prune(int64_t now_ms, int64_t keep_ms) {
  absl::MutexLock lock(&mu_);
  for (auto it = ended_.begin(); it != ended_.end();) {
    it = now_ms - it->second.ended_ms > keep_ms ? ended_.erase(it)
                                                : std::next(it);
  }
}

absl::StatusOr<std::shared_ptr<GangTable::Gang>> GangTable::ForRendezvous(
    const v1::RendezvousRequest& request, v1::RendezvousResponse* ended) {
  if (request.key().empty()) {
    return absl::InvalidArgumentError("key: must not be empty");
  }
  if (request.payload().size() > kMaxPayloadBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload: ", request.payload().size(),
                     " bytes; allowed: at most ", kMaxPayloadBytes));
  }
  auto it = gangs_.find(request.gang_id());
  if (it == gangs_.end()) {
    auto tomb = ended_.find(request.gang_id());
    if (tomb == ended_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gang_id: '", request.gang_id(),
          "' is not a gang of this coordinator (unknown, ended long ago, or "
          "formed before the coordinator restarted)"));
    }
    ended->set_torn_down(true);
    ended->set_reason(tomb->second.reason);
    return std::shared_ptr<Gang>();
  }
  const GangView& view = it->second->view;
  const int world = static_cast<int>(view.worker_ids.size());
  if (request.rank() < 0 || request.rank() >= world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank: ", request.rank(), " is out of range; allowed: 0..", world - 1));
  }
  if (view.worker_ids[request.rank()] != request.worker_id()) {
    return absl::PermissionDeniedError(
        absl::StrCat("worker '", request.worker_id(), "' is not rank ",
                     request.rank(), " of gang ", view.gang_id, " (that is '",
                     view.worker_ids[request.rank()], "')"));
  }
  return it->second;
}

absl::StatusOr<v1::RendezvousResponse> GangTable::Rendezvous(
    const v1::RendezvousRequest& request) {
  v1::RendezvousResponse response;
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::shared_ptr<Gang>> found =
      ForRendezvous(request, &response);
  if (!found.ok()) return found.status();
  const std::shared_ptr<Gang> gang = *std::move(found);
  if (gang == nullptr) return response;  // torn down: the reason is set
  std::vector<std::optional<std::string>>& posts = gang->posts[request.key()];
  posts.resize(gang->view.worker_ids.size());
  std::optional<std::string>& mine = posts[request.rank()];
  if (mine.has_value() && *mine != request.payload()) {
    return absl::AlreadyExistsError(
        absl::StrCat("key: rank ", request.rank(),
                     " already posted a different payload "
                     "under '",
                     request.key(), "' in gang ", gang->view.gang_id));
  }
  mine = request.payload();  // the same bytes again: idempotent
  const std::string key = request.key();
  const auto settled = [&gang, &key]() {
    return gang->ended || gang->AllPosted(key);
  };
  const absl::Duration wait =
      std::min(absl::Milliseconds(std::max(0, request.wait_ms())), kMaxWait);
  mu_.AwaitWithTimeout(absl::Condition(&settled), wait);
  if (gang->ended) {
    response.set_torn_down(true);
    response.set_reason(gang->end_reason);
    return response;
  }
  if (!gang->AllPosted(key)) return response;  // not yet: ask again
  response.set_complete(true);
  for (const std::optional<std::string>& payload : gang->posts[key]) {
    response.add_payloads(*payload);
  }
  return response;
}

}  // namespace moetune::coordinator
