#include "coordinator/cli/compare.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/stats.h"
#include "coordinator/device_bandwidth.h"
#include "tuner/config_key.h"
#include "tuner/winner.h"

namespace moetune::cli {
namespace {

// The same device and software; the build only without across_builds.
std::string MatchKey(const v1::Fingerprint& fp, bool across_builds) {
  return absl::StrCat(coordinator::DeviceKind(fp), "|", fp.driver_version(),
                      "|", fp.cuda_version(), "|", fp.nccl_version(), "|",
                      across_builds ? "" : fp.build_hash());
}

// The trials of one (workload, device, config) in one sweep.
struct Bucket {
  v1::Fingerprint fingerprint;
  std::vector<const v1::Trial*> trials;
};

// Where a trial ran: its result's fingerprint, or (a crash, a timeout, a
// lost lease: no result from the trial process) its worker's probe's.
const v1::Fingerprint* WhereItRan(const v1::Trial& trial,
                                  const CompareOptions& options) {
  if (!trial.result().fingerprint().device_name().empty()) {
    return &trial.result().fingerprint();
  }
  const std::string& worker = trial.result().worker_id().empty()
                                  ? trial.worker_id()
                                  : trial.result().worker_id();
  const auto it = options.worker_fingerprints.find(worker);
  return it == options.worker_fingerprints.end() ? nullptr : &it->second;
}

// Full-fidelity trials that ran somewhere, by match key, in order of first
// appearance (`order` gathers the keys).
void BucketTrials(const std::vector<v1::Trial>& trials,
                  const CompareOptions& options,
                  std::map<std::string, Bucket>* buckets,
                  std::vector<std::string>* order) {
  for (const v1::Trial& trial : trials) {
    const v1::Fingerprint* fp = WhereItRan(trial, options);
    if (trial.rung() != 0 || fp == nullptr) continue;
    const std::string key = absl::StrCat(trial.workload_hash(), "|",
                                         MatchKey(*fp, options.across_builds),
                                         "|", tuner::ConfigKey(trial.config()));
    Bucket& bucket = (*buckets)[key];
    if (bucket.trials.empty()) {
      order->push_back(key);
      bucket.fingerprint = *fp;
    }
    bucket.trials.push_back(&trial);
  }
}

void NoteBandwidths(const std::vector<v1::Trial>& trials,
                    std::map<std::string, double>* best) {
  for (const v1::Trial& trial : trials) {
    const v1::Fingerprint& fp = trial.result().fingerprint();
    if (fp.device_name().empty()) continue;
    double& gbps = (*best)[coordinator::DeviceKind(fp)];
    gbps =
        std::max(gbps, coordinator::FloorReadGbps(trial.result().roofline()));
  }
}

// The pooled figures of the DONE trials, or the state of the last one.
Side MakeSide(const Bucket& bucket, const std::map<std::string, double>& gbps) {
  Side side;
  side.present = true;
  side.trial_id = std::numeric_limits<int64_t>::max();
  std::vector<const v1::Trial*> done;
  for (const v1::Trial* trial : bucket.trials) {
    side.trial_id = std::min(side.trial_id, trial->trial_id());
    if (tuner::CanRank(*trial)) done.push_back(trial);
  }
  const v1::Trial& last = *bucket.trials.back();
  side.build_hash = bucket.fingerprint.build_hash();
  if (done.empty()) {
    side.state = last.state();
    side.reason =
        last.reason().empty() ? last.result().reason() : last.reason();
    side.trials = static_cast<int>(bucket.trials.size());
    return side;
  }
  side.state = v1::DONE;
  side.trials = static_cast<int>(done.size());
  side.stats = done.front()->result().stats();
  std::vector<double> pooled;
  for (const v1::Trial* trial : done) {
    pooled.insert(pooled.end(), trial->result().samples_us().begin(),
                  trial->result().samples_us().end());
  }
  if (done.size() > 1 && !pooled.empty()) side.stats = stats::Summarize(pooled);
  const v1::Roofline& r = done.front()->result().roofline();
  const auto it = gbps.find(coordinator::DeviceKind(bucket.fingerprint));
  const double bandwidth = it == gbps.end() ? 0 : it->second;
  side.floor_us = bandwidth > 0
                      ? r.bytes() / (bandwidth * 1e3) + r.comm_floor_us()
                      : r.floor_us();
  side.efficiency =
      side.stats.median_us() > 0 ? side.floor_us / side.stats.median_us() : 0;
  return side;
}

// (target - baseline) / baseline of the medians.
double RelativeChange(const v1::TimingStats& baseline,
                      const v1::TimingStats& target) {
  return (target.median_us() - baseline.median_us()) / baseline.median_us();
}

// Faster / slower when the intervals are apart, same when they overlap.
Verdict TimedVerdict(const v1::TimingStats& baseline,
                     const v1::TimingStats& target) {
  if (stats::IntervalsOverlap(baseline, target)) return Verdict::kSame;
  return target.median_us() < baseline.median_us() ? Verdict::kFaster
                                                   : Verdict::kSlower;
}

void Judge(ConfigComparison& row, double threshold_pct) {
  const bool was_done = row.baseline.state == v1::DONE;
  const bool is_done = row.target.state == v1::DONE;
  if (!row.baseline.present) {
    row.verdict = Verdict::kNew;
  } else if (!row.target.present) {
    row.verdict = Verdict::kGone;
  } else if (was_done && is_done) {
    row.change = RelativeChange(row.baseline.stats, row.target.stats);
    row.verdict = TimedVerdict(row.baseline.stats, row.target.stats);
  } else {
    row.verdict = was_done  ? Verdict::kNowFailing
                  : is_done ? Verdict::kFixed
                            : Verdict::kBothFailing;
  }
  row.regression =
      threshold_pct >= 0 &&
      (row.verdict == Verdict::kNowFailing ||
       (row.verdict == Verdict::kSlower && 100 * row.change > threshold_pct));
}

}  // namespace

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kFaster:
      return "faster";
    case Verdict::kSlower:
      return "slower";
    case Verdict::kSame:
      return "same";
    case Verdict::kNew:
      return "new";
    case Verdict::kGone:
      return "gone";
    case Verdict::kNowFailing:
      return "now-failing";
    case Verdict::kFixed:
      return "fixed";
    case Verdict::kBothFailing:
      return "failing";
  }
  return "?";
}

namespace {

ConfigComparison RowFor(const Bucket* baseline, const Bucket* target,
                        const std::map<std::string, double>& gbps) {
  ConfigComparison row;
  const Bucket& bucket = target != nullptr ? *target : *baseline;
  const v1::Trial& any = *bucket.trials.front();
  row.workload_hash = any.workload_hash();
  row.workload = any.workload();
  row.device = bucket.fingerprint.device_name();
  row.config = any.config();
  if (baseline != nullptr) row.baseline = MakeSide(*baseline, gbps);
  if (target != nullptr) row.target = MakeSide(*target, gbps);
  return row;
}

// The lowest DONE median of `side` among the rows of one workload/device.
const ConfigComparison* BestOf(const std::vector<const ConfigComparison*>& rows,
                               Side ConfigComparison::*side) {
  const ConfigComparison* best = nullptr;
  for (const ConfigComparison* row : rows) {
    const Side& s = row->*side;
    if (s.state != v1::DONE) continue;
    if (best == nullptr ||
        s.stats.median_us() < (best->*side).stats.median_us()) {
      best = row;
    }
  }
  return best;
}

// Per (workload, device): the winner of each side and how it moved.
std::vector<WorkloadComparison> SummarizeWorkloads(
    const std::vector<ConfigComparison>& configs) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const ConfigComparison*>> groups;
  for (const ConfigComparison& row : configs) {
    const std::string key = row.workload_hash + "|" + row.device;
    if (groups[key].empty()) order.push_back(key);
    groups[key].push_back(&row);
  }
  std::vector<WorkloadComparison> out;
  for (const std::string& key : order) {
    const std::vector<const ConfigComparison*>& rows = groups[key];
    WorkloadComparison w;
    w.workload_hash = rows.front()->workload_hash;
    w.workload = rows.front()->workload;
    w.device = rows.front()->device;
    w.baseline_best = BestOf(rows, &ConfigComparison::baseline);
    w.target_best = BestOf(rows, &ConfigComparison::target);
    if (w.baseline_best != nullptr && w.target_best != nullptr) {
      const v1::TimingStats& b = w.baseline_best->baseline.stats;
      const v1::TimingStats& t = w.target_best->target.stats;
      w.change = RelativeChange(b, t);
      w.verdict = TimedVerdict(b, t);
    } else {
      w.verdict = w.target_best != nullptr ? Verdict::kNew : Verdict::kGone;
    }
    out.push_back(std::move(w));
  }
  return out;
}

// Whether any result would match if build hashes were ignored.
bool MatchesAcrossBuilds(const std::vector<v1::Trial>& baseline,
                         const std::vector<v1::Trial>& target,
                         CompareOptions options) {
  options.across_builds = true;
  std::map<std::string, Bucket> b, t;
  std::vector<std::string> b_order, t_order;
  BucketTrials(baseline, options, &b, &b_order);
  BucketTrials(target, options, &t, &t_order);
  for (const std::string& key : t_order) {
    if (b.count(key)) return true;
  }
  return false;
}

}  // namespace

ComparisonReport Compare(const std::vector<v1::Trial>& baseline,
                         const std::vector<v1::Trial>& target,
                         const CompareOptions& options) {
  ComparisonReport report;
  report.floor_gbps = options.probed_gbps;
  NoteBandwidths(baseline, &report.floor_gbps);
  NoteBandwidths(target, &report.floor_gbps);
  std::map<std::string, Bucket> base_buckets, target_buckets;
  std::vector<std::string> base_order, target_order;
  BucketTrials(baseline, options, &base_buckets, &base_order);
  BucketTrials(target, options, &target_buckets, &target_order);
  for (const std::string& key : target_order) {
    const auto it = base_buckets.find(key);
    report.configs.push_back(
        RowFor(it == base_buckets.end() ? nullptr : &it->second,
               &target_buckets[key], report.floor_gbps));
  }
  for (const std::string& key : base_order) {
    if (target_buckets.count(key)) continue;
    report.configs.push_back(
        RowFor(&base_buckets[key], nullptr, report.floor_gbps));
  }
  for (ConfigComparison& row : report.configs) {
    Judge(row, options.threshold_pct);
    report.regressions += row.regression;
    report.compared += row.baseline.present && row.target.present;
  }
  // Winners are set side by side only where the configs matched: with none
  // in common (other builds, other devices) a winner "slower" would compare
  // what the config rows refuse to.
  if (report.compared > 0) {
    report.workloads = SummarizeWorkloads(report.configs);
  }
  if (report.compared == 0 && !options.across_builds) {
    report.would_match_across_builds =
        MatchesAcrossBuilds(baseline, target, options);
  }
  return report;
}

}  // namespace moetune::cli
