#include "tuner/search.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <unordered_map>

#include "common/stable_hash.h"
#include "common/stats.h"
#include "common/status_macros.h"
#include "tuner/winner.h"

namespace moetune::tuner {
namespace {

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

// Splits `total` (> 0) evenly over `parts`; the first total % parts get one
// more.
int64_t ShareOf(int64_t total, int index, int parts) {
  return total / parts + (index < total % parts ? 1 : 0);
}

// What one workload has used so far.
struct Usage {
  int64_t trials = 0;
  double seconds = 0;              // spent by finished trials
  int64_t timed = 0;               // samples of finished trials
  int64_t pending_iterations = 0;  // asked of queued / leased trials
};

Usage UsageOf(const WorkloadSearch& search) {
  Usage usage;
  for (const auto* list : {&search.trials, &search.confirmations}) {
    for (const v1::Trial* trial : *list) {
      ++usage.trials;
      usage.seconds += TrialGpuSeconds(*trial);
      if (IsFinal(trial->state())) {
        usage.timed += trial->result().samples_us_size();
      } else {
        usage.pending_iterations += trial->measurement().iterations();
      }
    }
  }
  return usage;
}

// What is left of a workload's whole share, the part held back for
// confirmation included.
struct Remaining {
  int64_t trials = kNoLimit;
  bool seconds = true;  // GPU-seconds left (or no such budget)
};

// Fills the budget fields of `search` (workload `index` of `count`).
Remaining ApplyBudget(const v1::Strategy& strategy, int index, int count,
                      WorkloadSearch& search) {
  const Usage usage = UsageOf(search);
  const Knobs& k = search.knobs;
  const int64_t confirm_trials =
      static_cast<int64_t>(k.confirm_top_k) * k.confirm_rounds;
  Remaining total;
  search.trials_left = kNoLimit;
  if (strategy.max_trials() > 0) {
    const int64_t share = ShareOf(strategy.max_trials(), index, count);
    const int64_t held = confirm_trials < share ? confirm_trials : 0;
    total.trials = std::max<int64_t>(0, share - usage.trials);
    search.trials_left = std::max<int64_t>(0, share - held - usage.trials);
  }
  search.trial_share = strategy.max_trials() > 0
                           ? ShareOf(strategy.max_trials(), index, count)
                           : kNoLimit;
  search.seconds_limited = strategy.max_gpu_seconds() > 0;
  if (search.seconds_limited) {
    const double share = strategy.max_gpu_seconds() / count;
    const double per_iteration =
        usage.timed > 0 ? usage.seconds / static_cast<double>(usage.timed) : 0;
    const double projected =
        static_cast<double>(usage.pending_iterations +
                            confirm_trials * search.full_iterations) *
        per_iteration;
    search.seconds_per_iteration = per_iteration;
    search.seconds_left = share - usage.seconds - projected;
    total.seconds = usage.seconds < share;
  }
  return total;
}

// Sorts the workload's history into search trials and confirmations.
// The history split by workload once per Propose: attaching each
// workload's share by scanning the whole history would cost workloads x
// history (10^10 for a 10^5-workload sweep).
using HistoryByWorkload =
    std::unordered_map<std::string, std::vector<const v1::Trial*>>;

HistoryByWorkload SplitHistory(const std::vector<v1::Trial>& history) {
  HistoryByWorkload split;
  for (const v1::Trial& trial : history) {
    split[trial.workload_hash()].push_back(&trial);
  }
  return split;
}

void AttachHistory(const std::vector<const v1::Trial*>& own,
                   WorkloadSearch& search) {
  for (const v1::Trial* trial : own) {
    if (!IsFinal(trial->state())) ++search.unfinished;
    if (trial->confirm_round() > 0) {
      search.confirmations.push_back(trial);
    } else {
      search.trials.push_back(trial);
    }
  }
}

// The other workloads' search trials, for strategies that learn across
// workloads: the history's, then what this Propose call proposed so far.
void AttachOthers(const std::vector<v1::Trial>& history,
                  const std::deque<v1::Trial>& proposed,
                  WorkloadSearch& search) {
  for (const v1::Trial& trial : history) {
    if (trial.workload_hash() != search.workload_hash &&
        trial.confirm_round() == 0) {
      search.others.push_back(&trial);
    }
  }
  for (const v1::Trial& trial : proposed) search.others.push_back(&trial);
}

WorkloadSearch MakeSearch(const SweepPlan& plan, int workload,
                          const std::set<std::string>& keys) {
  const v1::SweepSpec& spec = plan.spec();
  WorkloadSearch search;
  search.workload_hash = plan.workload_hash(workload);
  search.workload_index = workload;
  search.knobs = ResolveKnobs(spec.strategy());
  search.seed = search.knobs.seed ^ Fnv1a64(search.workload_hash);
  search.full_iterations = spec.measurement().iterations();
  search.keys = &keys;
  search.points = plan.Points(workload);
  for (size_t i = 0; i < search.points.size(); ++i) {
    search.points[i].set_proposal_key(ProposalKey(search.points[i]));
    search.point_index.emplace(ConfigKey(search.points[i].config()),
                               static_cast<int>(i));
  }
  return search;
}

// Drops proposals already in the sweep or repeated within the batch.
void DropKnown(std::set<std::string>& keys, std::vector<v1::Trial>& batch) {
  std::vector<v1::Trial> kept;
  for (v1::Trial& trial : batch) {
    if (keys.insert(trial.proposal_key()).second) {
      kept.push_back(std::move(trial));
    }
  }
  batch = std::move(kept);
}

// True when the workload's search is over for good: it has confirmation
// trials (the round is proposed once, when the search ended).
bool ConfirmationStarted(const std::vector<const v1::Trial*>& own) {
  for (const v1::Trial* trial : own) {
    if (trial->confirm_round() > 0) return true;
  }
  return false;
}

}  // namespace

Knobs ResolveKnobs(const v1::Strategy& strategy) {
  Knobs knobs;
  knobs.seed = strategy.seed();
  if (strategy.eta() > 0) knobs.eta = strategy.eta();
  knobs.min_iterations = strategy.min_iterations();
  knobs.initial_random = strategy.initial_random();
  knobs.confirm_top_k = strategy.confirm_top_k();
  if (strategy.confirm_rounds() > 0) {
    knobs.confirm_rounds = strategy.confirm_rounds();
  }
  return knobs;
}

bool OnlyTrialBudget(const SweepPlan& plan) {
  const v1::Strategy& strategy = plan.spec().strategy();
  return strategy.max_gpu_seconds() == 0 && strategy.confirm_top_k() == 0;
}

bool IsFinal(v1::TrialState state) {
  return state != v1::QUEUED && state != v1::LEASED &&
         state != v1::TRIAL_STATE_UNSPECIFIED;
}

double TrialGpuSeconds(const v1::Trial& trial) {
  if (!IsFinal(trial.state())) return 0.0;
  double sum_us = 0.0;
  for (double sample : trial.result().samples_us()) {
    if (std::isfinite(sample)) sum_us += sample;
  }
  return sum_us / 1e6;
}

bool IsDone(const v1::Trial& trial) { return CanRank(trial); }

double MedianOf(const v1::Trial& trial) {
  return IsDone(trial) ? trial.result().stats().median_us()
                       : std::numeric_limits<double>::infinity();
}

int WorkloadSearch::PointOf(const v1::TrialConfig& config) const {
  auto it = point_index.find(ConfigKey(config));
  return it == point_index.end() ? -1 : it->second;
}

bool WorkloadSearch::Proposed(int point, int rung, int round) const {
  v1::Trial probe = points[point];
  probe.set_rung(rung);
  probe.set_confirm_round(round);
  return keys->count(ProposalKey(probe)) > 0;
}

int64_t WorkloadSearch::Slots(int in_flight_cap, int iterations) const {
  int64_t slots = trials_left;
  if (seconds_limited && seconds_left <= 0) return 0;
  const double cost =
      seconds_per_iteration * (iterations > 0 ? iterations : full_iterations);
  if (seconds_limited && cost > 0) {
    slots = std::min<int64_t>(
        slots, static_cast<int64_t>(std::floor(seconds_left / cost)));
  }
  if (seconds_limited && in_flight_cap == 0) in_flight_cap = kSecondsInFlight;
  if (in_flight_cap > 0) {
    slots = std::min<int64_t>(slots, std::max(0, in_flight_cap - unfinished));
  }
  return slots;
}

v1::Trial WorkloadSearch::Make(int point, int rung, int round,
                               int iterations) const {
  v1::Trial trial = points[point];
  trial.set_state(v1::QUEUED);
  trial.set_rung(rung);
  trial.set_confirm_round(round);
  trial.mutable_measurement()->set_iterations(iterations);
  trial.set_proposal_key(ProposalKey(trial));
  return trial;
}

std::vector<int> SeededOrder(int n, uint64_t seed) {
  std::vector<int> order(static_cast<size_t>(std::max(n, 0)));
  for (int i = 0; i < n; ++i) order[i] = i;
  stats::SplitMix64 rng(seed);
  for (int i = n - 1; i > 0; --i) {
    const int j = static_cast<int>(rng.Below(static_cast<uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

std::vector<v1::Trial> ProposeInOrder(const WorkloadSearch& search,
                                      const std::vector<int>& order,
                                      int in_flight_cap) {
  std::vector<v1::Trial> out;
  int64_t slots = search.Slots(in_flight_cap);
  for (int point : order) {
    if (slots <= 0) break;
    if (search.Proposed(point, 0)) continue;
    out.push_back(search.Make(point, 0, 0, search.full_iterations));
    --slots;
  }
  return out;
}

std::vector<v1::Trial> ProposeConfirmation(const WorkloadSearch& search,
                                           int64_t trials_left_total,
                                           bool seconds_left) {
  const Knobs& k = search.knobs;
  if (k.confirm_top_k <= 0 || !seconds_left) return {};
  std::vector<std::pair<double, int>> ranked;  // (median, point)
  for (const v1::Trial* trial : search.trials) {
    const int point = search.PointOf(trial->config());
    if (trial->rung() != 0 || !IsDone(*trial) || point < 0) continue;
    ranked.emplace_back(MedianOf(*trial), point);
  }
  std::sort(ranked.begin(), ranked.end());
  ranked.erase(std::unique(ranked.begin(), ranked.end(),
                           [](const auto& a, const auto& b) {
                             return a.second == b.second;
                           }),
               ranked.end());
  int64_t top = std::min<int64_t>(k.confirm_top_k, ranked.size());
  top = std::min<int64_t>(top, trials_left_total / k.confirm_rounds);
  std::vector<v1::Trial> out;
  for (int round = 1; round <= k.confirm_rounds; ++round) {
    for (int64_t i = 0; i < top; ++i) {
      out.push_back(
          search.Make(ranked[i].second, 0, round, search.full_iterations));
    }
  }
  return out;
}

std::vector<v1::Trial> SearchStrategy::Propose(
    const SweepPlan& plan, const std::vector<v1::Trial>& history) {
  const v1::Strategy& strategy = plan.spec().strategy();
  std::set<std::string> keys;
  for (const v1::Trial& trial : history) keys.insert(ProposalKey(trial));
  std::vector<v1::Trial> out;
  // What this call proposed so far (stable addresses): later workloads see
  // it in `others`, as queued trials.
  std::deque<v1::Trial> proposed;
  const HistoryByWorkload by_workload = SplitHistory(history);
  const std::vector<const v1::Trial*> none;
  const int count = plan.workload_count();
  for (int i = 0; i < count; ++i) {
    const auto own = by_workload.find(plan.workload_hash(i));
    const auto& own_trials = own != by_workload.end() ? own->second : none;
    if (ConfirmationStarted(own_trials)) continue;
    WorkloadSearch search = MakeSearch(plan, i, keys);
    AttachHistory(own_trials, search);
    if (LearnsAcrossWorkloads()) AttachOthers(history, proposed, search);
    const Remaining total = ApplyBudget(strategy, i, count, search);
    std::vector<v1::Trial> batch = SearchStep(search);
    if (batch.empty() && search.unfinished == 0) {
      batch = ProposeConfirmation(search, total.trials, total.seconds);
    }
    DropKnown(keys, batch);
    for (v1::Trial& trial : batch) {
      if (trial.confirm_round() == 0) proposed.push_back(trial);
      out.push_back(std::move(trial));
    }
  }
  return out;
}

}  // namespace moetune::tuner
