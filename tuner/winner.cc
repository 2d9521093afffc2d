#include "tuner/winner.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "tuner/stats.h"

namespace moetune::tuner {
namespace {

// The ranked trials of one (workload, fingerprint).
struct Group {
  std::string fingerprint_hash;
  std::vector<const v1::Trial*> trials;
  int64_t newest_ms = std::numeric_limits<int64_t>::min();
};

struct WorkloadGroups {
  std::string workload_hash;
  std::vector<Group> groups;
};

Group& GroupFor(WorkloadGroups& workload, const std::string& fingerprint) {
  for (Group& group : workload.groups) {
    if (group.fingerprint_hash == fingerprint) return group;
  }
  Group& group = workload.groups.emplace_back();
  group.fingerprint_hash = fingerprint;
  return group;
}

// Rankable trials grouped by workload (first-appearance order) and
// fingerprint.
std::vector<WorkloadGroups> GroupTrials(const std::vector<v1::Trial>& trials) {
  std::vector<WorkloadGroups> workloads;
  std::map<std::string, size_t> index;
  for (const v1::Trial& trial : trials) {
    if (!CanRank(trial)) continue;
    auto [it, added] = index.emplace(trial.workload_hash(), workloads.size());
    if (added) workloads.emplace_back().workload_hash = trial.workload_hash();
    Group& group =
        GroupFor(workloads[it->second], trial.result().fingerprint().hash());
    group.trials.push_back(&trial);
    group.newest_ms = std::max(group.newest_ms, trial.updated_at_unix_ms());
  }
  return workloads;
}

void SortByMedian(std::vector<const v1::Trial*>& trials) {
  std::sort(trials.begin(), trials.end(),
            [](const v1::Trial* a, const v1::Trial* b) {
              const double ma = a->result().stats().median_us();
              const double mb = b->result().stats().median_us();
              if (ma != mb) return ma < mb;
              return a->trial_id() < b->trial_id();
            });
}

v1::BestForWorkload BestOf(const std::string& workload_hash, Group& group) {
  SortByMedian(group.trials);
  const v1::Trial& best = *group.trials.front();
  v1::BestForWorkload out;
  out.set_workload_hash(workload_hash);
  *out.mutable_workload() = best.workload();
  *out.mutable_best() = best;
  *out.mutable_fingerprint() = best.result().fingerprint();
  const v1::TimingStats& best_stats = best.result().stats();
  if (group.trials.size() > 1) {
    const v1::Trial& runner_up = *group.trials[1];
    *out.mutable_runner_up() = runner_up;
    out.set_margin_us(runner_up.result().stats().median_us() -
                      best_stats.median_us());
    out.set_tie(IntervalsOverlap(runner_up.result().stats(), best_stats));
  }
  for (const v1::Trial* trial : group.trials) {
    if (IntervalsOverlap(trial->result().stats(), best_stats)) {
      out.add_tied_trial_ids(trial->trial_id());
    }
  }
  return out;
}

void NewestFirst(std::vector<Group>& groups) {
  std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    if (a.newest_ms != b.newest_ms) return a.newest_ms > b.newest_ms;
    return a.fingerprint_hash < b.fingerprint_hash;
  });
}

}  // namespace

bool CanRank(const v1::Trial& trial) {
  if (trial.state() != v1::DONE || !trial.has_result()) return false;
  const v1::TrialState outcome = trial.result().outcome();
  return outcome == v1::DONE || outcome == v1::TRIAL_STATE_UNSPECIFIED;
}

v1::GetBestResponse SelectBest(const std::vector<v1::Trial>& trials) {
  v1::GetBestResponse response;
  for (WorkloadGroups& workload : GroupTrials(trials)) {
    NewestFirst(workload.groups);
    for (Group& group : workload.groups) {
      *response.add_workloads() = BestOf(workload.workload_hash, group);
    }
  }
  return response;
}

}  // namespace moetune::tuner
