// GangTable: the coordinator's live gangs, in memory. A MEASURED trial of
// world W = tp * ep runs on a gang of W workers, one per rank, granted
// together (the Scheduler decides who, under its mutex: gang_placement.h).
// The table holds, per gang, who is in it, which members have picked up
// their grant and which have reported DONE, and the rendezvous posts (the
// all-gather of bytes the ranks use to relay the NCCL id and IPC handles).
//
// A gang ends (End) when its trial is decided or when it is torn down (a
// member lost); its memory, the posts included, is dropped then and only a
// tombstone (its id and why it ended) stays for a while, so that a rank
// still waiting, or arriving late, is told the gang was torn down and why
// instead of "unknown gang". Nothing here is persisted: a restarted
// coordinator has no gangs, and re-runs its LEASED gang trials whole.
//
// Thread-safe: its own mutex, so that Rendezvous can block without holding
// the Scheduler's (lock order: the Scheduler's mutex, then this one).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/moetune.pb.h"

namespace moetune::coordinator {

// The world of the trial's gang: tp * ep when its communication is MEASURED
// (1 for a gang of one, whose collectives run for real at world 1); 0 for a
// trial one worker runs alone.
int GangWorld(const v1::TrialConfig& config);

// What the Scheduler needs to know of one gang (a copy).
struct GangView {
  std::string gang_id;
  int64_t trial_id = 0;
  int attempt = 0;
  std::vector<std::string> worker_ids;  // by rank
  std::vector<bool> picked_up;          // by rank
  std::vector<int64_t> picked_up_ms;    // by rank; 0 until picked up
  std::vector<bool> done;               // by rank: reported DONE
  int64_t formed_ms = 0;
  // The rank of `worker_id`, or -1.
  int RankOf(const std::string& worker_id) const;
};

class GangTable {
 public:
  // The longest a Rendezvous call blocks (a client loops to its deadline).
  static constexpr absl::Duration kMaxWait = absl::Seconds(10);
  // The most bytes one rank may post under one key.
  static constexpr size_t kMaxPayloadBytes = 64 * 1024;

  // Records a gang for the trial's attempt; rank r is worker_ids[r]. When
  // rank 0 is `asker` (the worker whose Acquire formed it), its grant is
  // picked up (the answer to that call, rank 0's proto, is returned); the
  // others pick theirs up with TakeGrant. The caller has made sure none of
  // them is in a live gang.
  v1::Gang Form(int64_t trial_id, int attempt,
                const std::vector<std::string>& worker_ids,
                const std::string& asker, int64_t now_ms);
  // The grant waiting for `worker_id` (a gang formed without it asking), if
  // any; marks it picked up.
  std::optional<std::pair<int64_t, v1::Gang>> TakeGrant(
      const std::string& worker_id, int64_t now_ms);
  // Whether the worker is held by a live gang: granted and not yet DONE.
  bool Holds(const std::string& worker_id) const;
  // Whether the worker is a member of the trial's live gang that picked up
  // its grant and has not reported DONE: it should be running the trial.
  bool Runs(int64_t trial_id, const std::string& worker_id) const;
  std::optional<GangView> OfTrial(int64_t trial_id) const;
  // Keeps rank `rank`'s DONE result; true once every rank reported DONE.
  bool NoteDone(int64_t trial_id, int rank, const v1::TrialResult& result);
  // Rank 0's DONE result (after NoteDone returned true).
  std::optional<v1::TrialResult> RankZeroResult(int64_t trial_id) const;
  // Ends the trial's gang (if any): drops it and its posts, wakes its
  // waiters with `reason`, keeps a tombstone until Prune.
  void End(int64_t trial_id, const std::string& reason, int64_t now_ms);
  // Drops tombstones older than `keep_ms`.
  void Prune(int64_t now_ms, int64_t keep_ms);
  // The all-gather: posts `request.payload` for `request.rank`, then waits
  // (up to min(wait_ms, kMaxWait)) until every rank posted under the key.
  // `worker_id` is the authenticated caller. INVALID_ARGUMENT for an
  // unknown gang, a bad rank or key or an oversized payload,
  // PERMISSION_DENIED for a caller that is not the gang's member of that
  // rank, ALREADY_EXISTS for a different payload under a key already posted.
  absl::StatusOr<v1::RendezvousResponse> Rendezvous(
      const v1::RendezvousRequest& request);

 private:
  struct Gang;
  std::shared_ptr<Gang> FindLocked(int64_t trial_id) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::shared_ptr<Gang>> ForRendezvous(
      const v1::RendezvousRequest& request, v1::RendezvousResponse* ended)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Gang>> gangs_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::string> gang_of_trial_ ABSL_GUARDED_BY(mu_);
  struct Tombstone {
    std::string reason;
    int64_t ended_ms = 0;
  };
  std::map<std::string, Tombstone> ended_ ABSL_GUARDED_BY(mu_);
};

}  // namespace moetune::coordinator
