#include "tuner/replay.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/legacy_spelling.h"
#include "common/stable_hash.h"
#include "common/stats.h"
#include "google/protobuf/util/json_util.h"
#include "kernels/backends/tile_shape.h"
#include "tuner/search.h"
#include "tuner/winner.h"

namespace moetune::tuner {
namespace {

std::string EntryKey(const std::string& workload_hash,
                     const v1::TrialConfig& config) {
  return absl::StrCat(workload_hash, "|", ConfigKey(config));
}

template <typename T>
void AddUnique(std::vector<T>& seen, const T& value) {
  if (std::find(seen.begin(), seen.end(), value) == seen.end()) {
    seen.push_back(value);
  }
}

bool SameTile(const v1::TileShape& a, const v1::TileShape& b) {
  return backends::TileOf(a) == backends::TileOf(b);
}

void AddTile(v1::SearchSpace& space, const v1::TileShape& tile) {
  for (const v1::TileShape& seen : space.tiles()) {
    if (SameTile(seen, tile)) return;
  }
  *space.add_tiles() = tile;
}

// The search space the recorded configs span, each list in the order first
// seen. The all-reduce, communication and attention are listed only where
// recorded: a recording without them replays with their defaults.
v1::SearchSpace SpaceOf(const v1::QueryTrialsResponse& recorded) {
  std::vector<int> tps, eps, communications, impls, splits;
  std::vector<std::string> backends;
  std::vector<bool> graphs;
  v1::SearchSpace s;
  for (const v1::Trial& t : recorded.trials()) {
    const v1::TrialConfig& c = t.config();
    AddUnique(backends, c.moe_backend());
    AddUnique(tps, c.tp());
    AddUnique(eps, c.ep());
    AddUnique(graphs, c.cuda_graph());
    if (c.all_reduce_impl() != v1::ALL_REDUCE_IMPL_UNSPECIFIED) {
      AddUnique(impls, static_cast<int>(c.all_reduce_impl()));
    }
    if (c.communication() != v1::COMMUNICATION_UNSPECIFIED) {
      AddUnique(communications, static_cast<int>(c.communication()));
    }
    if (c.attention_split() != v1::ATTENTION_SPLIT_UNSPECIFIED) {
      AddUnique(splits, static_cast<int>(c.attention_split()));
    }
    if (c.has_tile()) AddTile(s, c.tile());
  }
  for (const std::string& b : backends) s.add_moe_backends(b);
  s.mutable_tp()->Assign(tps.begin(), tps.end());
  s.mutable_ep()->Assign(eps.begin(), eps.end());
  for (bool g : graphs) s.add_cuda_graph(g);
  s.mutable_all_reduce_impls()->Assign(impls.begin(), impls.end());
  s.mutable_communication()->Assign(communications.begin(),
                                    communications.end());
  s.mutable_attention_splits()->Assign(splits.begin(), splits.end());
  return s;
}

}  // namespace

ReplayOracle::ReplayOracle(const v1::QueryTrialsResponse& recorded)
    : recorded_(recorded) {
  for (const v1::Trial& trial : recorded_.trials()) {
    if (!IsFinal(trial.state())) continue;
    Entry& entry = entries_[EntryKey(trial.workload_hash(), trial.config())];
    entry.any_result = trial.result();
    entry.any_result.set_outcome(trial.state());
    if (trial.result().reason().empty()) {
      entry.any_result.set_reason(trial.reason());
    }
    if (!CanRank(trial) || trial.rung() != 0) continue;
    if (!entry.done) entry.median_us = trial.result().stats().median_us();
    entry.done = true;
    entry.samples_us.insert(entry.samples_us.end(),
                            trial.result().samples_us().begin(),
                            trial.result().samples_us().end());
  }
  for (auto& [key, entry] : entries_) {
    std::sort(entry.samples_us.begin(), entry.samples_us.end());
    if (!entry.samples_us.empty()) {
      entry.median_us = stats::Percentile(entry.samples_us, 0.5);
    }
  }
}

absl::StatusOr<ReplayOracle> ReplayOracle::FromJson(std::string_view json) {
  v1::QueryTrialsResponse recorded;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto status = google::protobuf::util::JsonStringToMessage(
      std::string(json), &recorded, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("recorded sweep: not a QueryTrialsResponse in protobuf "
                     "JSON: ",
                     status.ToString()));
  }
  for (int i = 0; i < recorded.trials_size(); ++i) {
    const absl::Status legacy =
        NormalizeLegacyFields(*recorded.mutable_trials(i)->mutable_config());
    if (!legacy.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("recorded sweep: trials[", i, "].", legacy.message()));
    }
  }
  return ReplayOracle(recorded);
}

absl::StatusOr<ReplayOracle> ReplayOracle::FromJsonFile(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("recorded sweep: cannot read '", path, "'"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return FromJson(text.str());
}

const ReplayOracle::Entry* ReplayOracle::Find(
    const std::string& workload_hash, const v1::TrialConfig& config) const {
  auto it = entries_.find(EntryKey(workload_hash, config));
  return it == entries_.end() ? nullptr : &it->second;
}

v1::TrialResult ReplayOracle::Simulate(const v1::Trial& proposed,
                                       uint64_t seed) const {
  v1::TrialResult result;
  const Entry* entry = Find(proposed.workload_hash(), proposed.config());
  if (entry == nullptr) {
    result.set_outcome(v1::UNAVAILABLE);
    result.set_reason("replay: config not recorded");
  } else if (!entry->done || entry->samples_us.empty()) {
    result = entry->any_result;
    result.clear_samples_us();
  } else {
    result = entry->any_result;
    result.set_outcome(v1::DONE);
    result.clear_reason();
    stats::SplitMix64 rng(seed ^ Fnv1a64(ProposalKey(proposed)));
    std::vector<double> drawn;
    const int n = std::max(1, proposed.measurement().iterations());
    for (int i = 0; i < n; ++i) {
      drawn.push_back(entry->samples_us[rng.Below(entry->samples_us.size())]);
    }
    result.mutable_samples_us()->Assign(drawn.begin(), drawn.end());
    *result.mutable_stats() = stats::Summarize(drawn);
  }
  result.set_trial_id(proposed.trial_id());
  result.set_attempt(1);
  return result;
}

std::optional<double> ReplayOracle::TrueMedianUs(
    const std::string& workload_hash, const v1::TrialConfig& config) const {
  const Entry* entry = Find(workload_hash, config);
  if (entry == nullptr || !entry->done) return std::nullopt;
  return entry->median_us;
}

absl::StatusOr<v1::SweepSpec> SpecFromRecording(
    const v1::QueryTrialsResponse& recorded) {
  if (recorded.trials().empty()) {
    return absl::InvalidArgumentError("recorded sweep: trials: none");
  }
  const v1::Trial& first = recorded.trials(0);
  v1::SweepSpec spec;
  spec.set_name("replay");
  v1::WorkloadSpace& w = *spec.mutable_workload();
  w.set_model_preset(first.workload().model_preset());
  w.set_layers(first.workload().layers());
  *w.mutable_routing() = first.workload().routing();
  w.set_seed(first.workload().seed());
  w.set_region(first.workload().region());
  w.set_chain_layers(first.workload().chain_layers());
  if (first.workload().has_quantization()) {
    *w.mutable_quantization() = first.workload().quantization();
  }
  std::vector<int> batches, contexts, kv_dtypes;
  for (const v1::Trial& t : recorded.trials()) {
    AddUnique(batches, t.workload().batch_size());
    AddUnique(contexts, t.workload().context_length());
    AddUnique(kv_dtypes, static_cast<int>(t.workload().kv_cache_dtype()));
  }
  w.mutable_batch_sizes()->Assign(batches.begin(), batches.end());
  w.mutable_context_lengths()->Assign(contexts.begin(), contexts.end());
  // Recorded workloads store the default as unset: an empty list.
  if (kv_dtypes != std::vector<int>{v1::KV_CACHE_DTYPE_UNSPECIFIED}) {
    w.mutable_kv_cache_dtypes()->Assign(kv_dtypes.begin(), kv_dtypes.end());
  }
  *spec.mutable_space() = SpaceOf(recorded);
  *spec.mutable_measurement() = first.measurement();
  spec.mutable_strategy()->set_kind(v1::Strategy::GRID);
  return spec;
}

namespace {

// Runs one batch of proposals through the oracle into `run`.
absl::Status SimulateBatch(std::vector<v1::Trial> batch,
                           const ReplayOracle& oracle, uint64_t seed,
                           std::set<std::string>& keys, ReplayRun& run) {
  for (v1::Trial& trial : batch) {
    if (!keys.insert(ProposalKey(trial)).second) {
      return absl::InternalError(absl::StrCat(
          "replay: proposal_key proposed twice: ", ProposalKey(trial)));
    }
    if (run.trials.size() >= static_cast<size_t>(kMaxReplayTrials)) {
      return absl::InternalError("replay: the strategy never stops");
    }
    const int64_t id = static_cast<int64_t>(run.trials.size()) + 1;
    trial.set_trial_id(id);
    trial.set_sweep_id(1);
    *trial.mutable_result() = oracle.Simulate(trial, seed);
    trial.set_state(trial.result().outcome());
    trial.set_reason(trial.result().reason());
    trial.set_attempt(1);
    trial.set_updated_at_unix_ms(id);
    run.gpu_seconds += TrialGpuSeconds(trial);
    run.trials.push_back(std::move(trial));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReplayRun> RunReplay(const v1::SweepSpec& spec,
                                    Strategy& strategy,
                                    const ReplayOracle& oracle, uint64_t seed) {
  // A recorded sweep's plugin backends are planned from its own record.
  absl::StatusOr<std::shared_ptr<const SweepPlan>> plan =
      SweepPlan::Create(spec, BackendCatalog::Recorded(spec.space()));
  if (!plan.ok()) return plan.status();
  ReplayRun run;
  std::set<std::string> keys;
  while (true) {
    std::vector<v1::Trial> batch = strategy.Propose(**plan, run.trials);
    if (batch.empty()) break;
    ++run.rounds;
    absl::Status status =
        SimulateBatch(std::move(batch), oracle, seed, keys, run);
    if (!status.ok()) return status;
  }
  run.pick = SelectBest(run.trials);
  for (const v1::BestForWorkload& best : run.pick.workloads()) {
    run.pick_true_median_us.push_back(
        oracle.TrueMedianUs(best.workload_hash(), best.best().config())
            .value_or(std::numeric_limits<double>::infinity()));
  }
  return run;
}

}  // namespace moetune::tuner
