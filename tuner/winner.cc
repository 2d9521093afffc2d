#include "tuner/winner.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/stats.h"
#include "tuner/config_key.h"

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

// The trials of the group's deciding rung: 0, or the lowest present.
std::vector<const v1::Trial*> DecidingTrials(const Group& group, int* rung) {
  *rung = std::numeric_limits<int>::max();
  for (const v1::Trial* trial : group.trials) {
    *rung = std::min(*rung, trial->rung());
  }
  std::vector<const v1::Trial*> kept;
  for (const v1::Trial* trial : group.trials) {
    if (trial->rung() == *rung) kept.push_back(trial);
  }
  return kept;
}

// One config's entry: its representative trial with pooled samples/stats.
v1::Trial Pool(std::vector<const v1::Trial*> trials) {
  std::sort(trials.begin(), trials.end(),
            [](const v1::Trial* a, const v1::Trial* b) {
              return a->trial_id() < b->trial_id();
            });
  v1::Trial entry = *trials.front();
  if (trials.size() == 1) return entry;
  std::vector<double> pooled;
  for (const v1::Trial* trial : trials) {
    pooled.insert(pooled.end(), trial->result().samples_us().begin(),
                  trial->result().samples_us().end());
  }
  if (pooled.empty()) return entry;
  v1::TrialResult& result = *entry.mutable_result();
  result.mutable_samples_us()->Assign(pooled.begin(), pooled.end());
  *result.mutable_stats() = stats::Summarize(pooled);
  return entry;
}

// Pooled entries of the deciding trials, best first.
std::vector<v1::Trial> RankedEntries(const std::vector<const v1::Trial*>& in) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const v1::Trial*>> by_config;
  for (const v1::Trial* trial : in) {
    const std::string key = ConfigKey(trial->config());
    if (by_config[key].empty()) order.push_back(key);
    by_config[key].push_back(trial);
  }
  std::vector<v1::Trial> entries;
  for (const std::string& key : order) entries.push_back(Pool(by_config[key]));
  std::sort(entries.begin(), entries.end(),
            [](const v1::Trial& a, const v1::Trial& b) {
              const double ma = a.result().stats().median_us();
              const double mb = b.result().stats().median_us();
              if (ma != mb) return ma < mb;
              return a.trial_id() < b.trial_id();
            });
  return entries;
}

std::string Ci(const v1::TimingStats& s) {
  return absl::StrFormat("median %.1f us, CI [%.1f, %.1f]", s.median_us(),
                         s.ci_low_us(), s.ci_high_us());
}

// best, runner-up, margin, ties of `entries` (best first, non-empty).
v1::BestForWorkload Fill(const std::string& workload_hash,
                         const v1::Trial& best,
                         const std::vector<v1::Trial>& others) {
  v1::BestForWorkload out;
  out.set_workload_hash(workload_hash);
  *out.mutable_workload() = best.workload();
  *out.mutable_best() = best;
  *out.mutable_fingerprint() = best.result().fingerprint();
  const v1::TimingStats& best_stats = best.result().stats();
  out.add_tied_trial_ids(best.trial_id());
  if (!others.empty()) {
    *out.mutable_runner_up() = others.front();
    out.set_margin_us(others.front().result().stats().median_us() -
                      best_stats.median_us());
    out.set_tie(
        stats::IntervalsOverlap(others.front().result().stats(), best_stats));
  }
  for (const v1::Trial& other : others) {
    if (stats::IntervalsOverlap(other.result().stats(), best_stats)) {
      out.add_tied_trial_ids(other.trial_id());
    }
  }
  return out;
}

const v1::Trial* IncumbentFor(const std::vector<v1::Trial>& incumbents,
                              const std::string& workload_hash,
                              const std::string& fingerprint_hash) {
  for (const v1::Trial& incumbent : incumbents) {
    if (CanRank(incumbent) && incumbent.workload_hash() == workload_hash &&
        incumbent.result().fingerprint().hash() == fingerprint_hash) {
      return &incumbent;
    }
  }
  return nullptr;
}

// The incumbent rule (see winner.h) for a group with entries, best first.
v1::BestForWorkload Challenge(const std::string& workload_hash,
                              const v1::Trial& incumbent,
                              std::vector<v1::Trial> entries) {
  const v1::TimingStats& inc = incumbent.result().stats();
  const v1::TimingStats& chal = entries.front().result().stats();
  if (chal.ci_high_us() < inc.ci_low_us()) {
    const v1::Trial best = entries.front();
    entries.erase(entries.begin());
    v1::BestForWorkload out = Fill(workload_hash, best, entries);
    out.mutable_best()->set_reason(absl::StrCat(
        kRuleChallengerWon, ": ", Ci(chal), " is below incumbent trial ",
        incumbent.trial_id(), "'s ", Ci(inc)));
    return out;
  }
  v1::BestForWorkload out = Fill(workload_hash, incumbent, entries);
  out.mutable_best()->set_reason(absl::StrCat(
      kRuleIncumbentKept, ": challenger trial ", entries.front().trial_id(),
      " ", Ci(chal), " is not faster beyond the interval"));
  return out;
}

// An incumbent whose config this query measured again is judged by the new
// figure: a night that ran 35% slower must not show last night's median as
// its winner. Its pooled entry leaves `entries` and stands in for it.
v1::BestForWorkload ChallengeRemeasured(const std::string& workload_hash,
                                        const v1::Trial& incumbent,
                                        std::vector<v1::Trial> entries) {
  const std::string key = ConfigKey(incumbent.config());
  const auto same = std::find_if(
      entries.begin(), entries.end(),
      [&](const v1::Trial& e) { return ConfigKey(e.config()) == key; });
  if (same == entries.end()) {
    return Challenge(workload_hash, incumbent, std::move(entries));
  }
  const v1::Trial remeasured = *same;
  entries.erase(same);
  if (entries.empty()) {
    v1::BestForWorkload out = Fill(workload_hash, remeasured, entries);
    out.mutable_best()->set_reason(
        absl::StrCat(kRuleIncumbentKept, ": incumbent trial ",
                     incumbent.trial_id(), " re-measured, no challenger"));
    return out;
  }
  v1::BestForWorkload out =
      Challenge(workload_hash, remeasured, std::move(entries));
  out.mutable_best()->set_reason(absl::StrCat(
      out.best().reason(), " (incumbent trial ", incumbent.trial_id(),
      " re-measured as trial ", remeasured.trial_id(), ")"));
  return out;
}

v1::BestForWorkload BestOf(const std::string& workload_hash, const Group& group,
                           const std::vector<v1::Trial>& incumbents) {
  int rung = 0;
  std::vector<v1::Trial> entries = RankedEntries(DecidingTrials(group, &rung));
  const v1::Trial* incumbent =
      IncumbentFor(incumbents, workload_hash, group.fingerprint_hash);
  if (incumbent != nullptr && rung == 0) {
    return ChallengeRemeasured(workload_hash, *incumbent, std::move(entries));
  }
  if (incumbent != nullptr)
    return Challenge(workload_hash, *incumbent, entries);
  const v1::Trial best = entries.front();
  entries.erase(entries.begin());
  v1::BestForWorkload out = Fill(workload_hash, best, entries);
  out.mutable_best()->set_reason(
      rung == 0 ? absl::StrCat(kRuleFastest, ": lowest pooled median of ",
                               entries.size() + 1, " configs")
                : absl::StrCat(kRuleScreeningOnly,
                               ": no full-measurement "
                               "trial; lowest median at screening rung ",
                               rung));
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

std::string_view DecidedBy(const v1::BestForWorkload& best) {
  const std::string& reason = best.best().reason();
  const size_t colon = reason.find(':');
  if (colon == std::string::npos) return {};
  return std::string_view(reason).substr(0, colon);
}

v1::GetBestResponse SelectBest(const std::vector<v1::Trial>& trials) {
  return SelectBest(trials, {});
}

v1::GetBestResponse SelectBest(const std::vector<v1::Trial>& trials,
                               const std::vector<v1::Trial>& incumbents) {
  v1::GetBestResponse response;
  for (WorkloadGroups& workload : GroupTrials(trials)) {
    NewestFirst(workload.groups);
    for (const Group& group : workload.groups) {
      *response.add_workloads() =
          BestOf(workload.workload_hash, group, incumbents);
    }
  }
  return response;
}

}  // namespace moetune::tuner
