// moetune-strategy-bench: replays each strategy against a recorded sweep
// (tuner/replay.h) over several seeds and prints what it cost and how good
// its pick was, against the full grid:
//   moetune-strategy-bench --recorded FILE.json [--seeds 10]
//   moetune-strategy-bench --db moetune.db [--sweep N] [--seeds 10]
// The recording is a QueryTrialsResponse in protobuf JSON, or read from a
// moetune SQLite database (db/store.h): every trial of sweep N, or every DONE
// trial of the database without --sweep (full-measurement trials first, so
// that the replayed spec takes their iterations).
// Strategies: grid; random with max_trials = 25% of the grid; successive
// halving (defaults); tpe with max_trials = 25% of the grid, tpe with
// max_gpu_seconds = 25% of the grid's (mean over the seeds' grid replays),
// and tpe with no budget (its own stopping rule).
// Columns, mean over seeds (and workloads for the gap): trials, GPU-seconds, %
// of the grid's GPU-seconds, gap of the pick's recorded median to the recorded
// best (%), the worst gap, and how often the pick is inside the grid's tie
// set (SelectBest over the recording). Target: successive halving and tpe
// within 2% of the best with <= 25% of the grid's GPU-seconds.
// Exit status: 0, or 1 when the recording cannot be read or a replay fails.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "db/store.h"
#include "tuner/replay.h"
#include "tuner/spec.h"
#include "tuner/strategy.h"
#include "tuner/winner.h"

namespace moetune::tuner {
namespace {

struct Args {
  std::string recorded;
  std::string db;
  int64_t sweep = 0;  // 0 = every DONE trial of the database
  int seeds = 10;
};

bool ParseArgs(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    if (flag == "--recorded") {
      args.recorded = argv[++i];
    } else if (flag == "--db") {
      args.db = argv[++i];
    } else if (flag == "--sweep") {
      args.sweep = std::atoll(argv[++i]);
      if (args.sweep <= 0) return false;
    } else if (flag == "--seeds") {
      args.seeds = std::atoi(argv[++i]);
    } else {
      return false;
    }
  }
  const bool one_source = args.recorded.empty() != args.db.empty();
  const bool sweep_ok = args.sweep == 0 || !args.db.empty();
  return one_source && sweep_ok && args.seeds >= 1;
}

// What the full recording says per workload: the best recorded median and
// the configs tied with the recorded winner.
struct Truth {
  std::map<std::string, double> best_us;
  std::map<std::string, std::set<std::string>> tied;
};

Truth TruthOf(const ReplayOracle& oracle) {
  Truth truth;
  std::vector<v1::Trial> trials(oracle.recorded().trials().begin(),
                                oracle.recorded().trials().end());
  std::map<int64_t, const v1::Trial*> by_id;
  for (const v1::Trial& t : trials) by_id[t.trial_id()] = &t;
  const v1::GetBestResponse recorded_best = SelectBest(trials);
  for (const v1::BestForWorkload& best : recorded_best.workloads()) {
    std::set<std::string>& tied = truth.tied[best.workload_hash()];
    for (int64_t id : best.tied_trial_ids()) {
      tied.insert(ConfigKey(by_id.at(id)->config()));
    }
  }
  for (const v1::Trial& t : trials) {
    const std::optional<double> median =
        oracle.TrueMedianUs(t.workload_hash(), t.config());
    if (!median) continue;
    auto [it, added] = truth.best_us.emplace(t.workload_hash(), *median);
    if (!added) it->second = std::min(it->second, *median);
  }
  return truth;
}

struct Row {
  std::string name;
  double trials = 0, gpu_s = 0, gap_sum = 0, gap_max = 0;
  int picks = 0, in_tie = 0;
  std::map<std::string, std::map<std::string, int>> pick_counts;
};

void Account(const ReplayRun& run, const Truth& truth, Row& row) {
  row.trials += static_cast<double>(run.trials.size());
  row.gpu_s += run.gpu_seconds;
  for (int i = 0; i < run.pick.workloads_size(); ++i) {
    const v1::BestForWorkload& best = run.pick.workloads(i);
    const double truth_us = truth.best_us.at(best.workload_hash());
    const double gap =
        100.0 * (run.pick_true_median_us[i] - truth_us) / truth_us;
    const std::string key = ConfigKey(best.best().config());
    row.gap_sum += gap;
    row.gap_max = std::max(row.gap_max, gap);
    ++row.picks;
    row.in_tie += truth.tied.at(best.workload_hash()).count(key) ? 1 : 0;
    ++row.pick_counts[best.workload_hash()][key];
  }
}

struct Variant {
  std::string name;
  v1::Strategy::Kind kind;
  bool quarter_trials;   // max_trials = 25% of the grid's points
  bool quarter_seconds;  // max_gpu_seconds = 25% of the grid's
};

absl::StatusOr<Row> RunVariant(const Variant& variant, v1::SweepSpec spec,
                               int grid_points, double grid_gpu_s,
                               const ReplayOracle& oracle, const Truth& truth,
                               int seeds) {
  Row row;
  row.name = variant.name;
  spec.mutable_strategy()->set_kind(variant.kind);
  if (variant.quarter_trials) {
    spec.mutable_strategy()->set_max_trials((grid_points + 3) / 4);
  }
  if (variant.quarter_seconds) {
    spec.mutable_strategy()->set_max_gpu_seconds(0.25 * grid_gpu_s);
  }
  for (int seed = 1; seed <= seeds; ++seed) {
    spec.mutable_strategy()->set_seed(static_cast<uint64_t>(seed));
    absl::StatusOr<std::unique_ptr<Strategy>> strategy =
        MakeStrategy(spec.strategy());
    if (!strategy.ok()) return strategy.status();
    absl::StatusOr<ReplayRun> run =
        RunReplay(spec, **strategy, oracle, static_cast<uint64_t>(seed));
    if (!run.ok()) return run.status();
    Account(*run, truth, row);
  }
  return row;
}

void PrintRow(const Row& row, int seeds, double grid_gpu_s) {
  const double gpu_s = row.gpu_s / seeds;
  std::cout << absl::StrFormat(
      "%-20s %8.1f %10.4f %7.1f %8.2f %8.2f %7.0f\n", row.name,
      row.trials / seeds, gpu_s, 100.0 * gpu_s / grid_gpu_s,
      row.picks > 0 ? row.gap_sum / row.picks : 0.0, row.gap_max,
      row.picks > 0 ? 100.0 * row.in_tie / row.picks : 0.0);
}

void PrintPicks(const std::vector<Row>& rows, int seeds) {
  std::cout << "\nmost frequent pick per workload (of " << seeds << " seeds)\n";
  for (const Row& row : rows) {
    for (const auto& [workload, counts] : row.pick_counts) {
      auto top = std::max_element(
          counts.begin(), counts.end(),
          [](const auto& a, const auto& b) { return a.second < b.second; });
      std::cout << absl::StrFormat("  %-20s %s  %-28s x%d\n", row.name,
                                   workload, top->first, top->second);
    }
  }
}

int GridPoints(const v1::SweepSpec& spec) {
  absl::StatusOr<std::shared_ptr<const SweepPlan>> plan =
      SweepPlan::Create(spec);
  return plan.ok() ? static_cast<int>((*plan)->point_count()) : 0;
}

// The recording from a moetune database: sweep `sweep`'s trials, or every
// DONE trial when sweep is 0; rung-0 trials first (see the top comment).
absl::StatusOr<ReplayOracle> OracleFromDb(const std::string& path,
                                          int64_t sweep) {
  if (!std::ifstream(path)) {
    return absl::NotFoundError(absl::StrCat("--db: cannot read '", path, "'"));
  }
  absl::StatusOr<std::unique_ptr<db::Store>> store = db::Store::Open(path);
  if (!store.ok()) return store.status();
  v1::TrialFilter filter;
  filter.set_sweep_id(sweep);
  if (sweep == 0) filter.set_state(v1::DONE);
  absl::StatusOr<std::vector<v1::Trial>> trials = (*store)->QueryTrials(filter);
  if (!trials.ok()) return trials.status();
  std::stable_partition(trials->begin(), trials->end(),
                        [](const v1::Trial& t) { return t.rung() == 0; });
  v1::QueryTrialsResponse recorded;
  for (v1::Trial& t : *trials) *recorded.add_trials() = std::move(t);
  if (recorded.trials().empty()) {
    return absl::NotFoundError(absl::StrCat(
        "--db: no trials in '", path, "'",
        sweep > 0 ? absl::StrCat(" for sweep ", sweep) : " in state DONE"));
  }
  return ReplayOracle(recorded);
}

int Main(const Args& args) {
  absl::StatusOr<ReplayOracle> oracle =
      args.db.empty() ? ReplayOracle::FromJsonFile(args.recorded)
                      : OracleFromDb(args.db, args.sweep);
  if (!oracle.ok()) return std::cerr << oracle.status() << "\n", 1;
  absl::StatusOr<v1::SweepSpec> spec = SpecFromRecording(oracle->recorded());
  if (!spec.ok()) return std::cerr << spec.status() << "\n", 1;
  const Truth truth = TruthOf(*oracle);
  const int points = GridPoints(*spec);
  const std::vector<Variant> variants = {
      {"grid", v1::Strategy::GRID, false, false},
      {"random (25% trials)", v1::Strategy::RANDOM, true, false},
      {"successive_halving", v1::Strategy::SUCCESSIVE_HALVING, false, false},
      {"tpe (25% trials)", v1::Strategy::TPE, true, false},
      {"tpe (25% GPU-s)", v1::Strategy::TPE, false, true},
      {"tpe (no budget)", v1::Strategy::TPE, false, false}};
  std::vector<Row> rows;
  double grid_gpu_s = 0;  // the first variant (grid) sets it
  for (const Variant& variant : variants) {
    absl::StatusOr<Row> row = RunVariant(variant, *spec, points, grid_gpu_s,
                                         *oracle, truth, args.seeds);
    if (!row.ok()) return std::cerr << row.status() << "\n", 1;
    if (rows.empty()) grid_gpu_s = row->gpu_s / args.seeds;
    rows.push_back(*std::move(row));
  }
  std::cout << absl::StrFormat(
      "recorded: %s (%d grid points, %d workloads), %d seeds\n",
      args.db.empty()
          ? args.recorded
          : absl::StrCat(args.db, args.sweep > 0
                                      ? absl::StrCat(" sweep ", args.sweep)
                                      : std::string(" DONE")),
      points, static_cast<int>(truth.best_us.size()), args.seeds);
  std::cout << absl::StrFormat("%-20s %8s %10s %7s %8s %8s %7s\n", "strategy",
                               "trials", "gpu_s", "%grid", "gap%", "max_gap%",
                               "in_tie%");
  std::cout << absl::StrFormat("%-20s %8s %10s %7s %8s %8s %7s\n", "", "(n)",
                               "(s)", "(%)", "(%)", "(%)", "(%)");
  for (const Row& row : rows) PrintRow(row, args.seeds, grid_gpu_s);
  PrintPicks(rows, args.seeds);
  return 0;
}

}  // namespace
}  // namespace moetune::tuner

int main(int argc, char** argv) {
  moetune::tuner::Args args;
  if (!moetune::tuner::ParseArgs(argc, argv, args)) {
    std::cerr << "usage: moetune-strategy-bench (--recorded FILE.json | --db "
                 "FILE.db [--sweep N (>= 1)]) [--seeds N (>= 1, default "
                 "10)]\n";
    return 2;
  }
  return moetune::tuner::Main(args);
}
