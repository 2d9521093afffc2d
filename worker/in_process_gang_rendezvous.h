// InProcessGangRendezvous: a GangRendezvous whose ranks are threads of one
// process (tests of code that meets its gang, with no coordinator). A
// RendezvousHub is the meeting point of one gang of `world` ranks; each
// thread takes its rank's view with ForRank. TearDown ends the gang: every
// waiting or later AllGather is ABORTED with the reason, as a torn-down
// gang's are. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "worker/gang_rendezvous.h"

namespace moetune::worker {

class RendezvousHub {
 public:
  explicit RendezvousHub(int world) : world_(world) {}
  // Rank `rank`'s door to the hub (the hub must outlive it).
  std::unique_ptr<GangRendezvous> ForRank(int rank);
  void TearDown(const std::string& reason);

  absl::StatusOr<std::vector<std::string>> AllGather(int rank,
                                                     const std::string& key,
                                                     const std::string& payload,
                                                     absl::Time deadline);

 private:
  bool Settled(const std::string& key) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const int world_;
  absl::Mutex mu_;
  std::map<std::string, std::vector<std::optional<std::string>>> posts_
      ABSL_GUARDED_BY(mu_);
  std::optional<std::string> torn_down_ ABSL_GUARDED_BY(mu_);
};

}  // namespace moetune::worker
