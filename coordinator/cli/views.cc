#include "coordinator/cli/views.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"
#include "kernels/backends/descriptor.h"
#include "tuner/config_key.h"

namespace moetune::cli {
namespace {

std::string ConfigCells(const v1::TrialConfig& c) {
  return absl::StrCat(c.moe_backend(), " ", tuner::TileText(c), " tp", c.tp(),
                      " ep", c.ep(), c.cuda_graph() ? " graph" : "");
}

std::vector<std::string> TrialRow(const v1::Trial& t) {
  const v1::TrialResult& r = t.result();
  const bool timed = r.stats().samples() > 0;
  const bool step = timed && t.workload().region() == v1::DECODE_STEP &&
                    r.stats().median_us() > 0;
  const auto timed_cell = [timed](double v, int precision = 1) {
    return timed ? FormatDouble(v, precision) : std::string("-");
  };
  return {
      absl::StrCat(t.trial_id()), t.config().moe_backend(),
      tuner::TileText(t.config()),
      absl::StrCat(t.config().tp(), "x", t.config().ep()),
      t.config().cuda_graph() ? "on" : "off",
      absl::StrCat(t.workload().batch_size()),
      absl::StrCat(t.workload().context_length()),
      timed_cell(r.stats().median_us()), timed_cell(r.stats().p90_us()),
      timed ? absl::StrCat(FormatDouble(r.stats().ci_low_us()), "-",
                           FormatDouble(r.stats().ci_high_us()))
            : "-",
      timed_cell(r.roofline().floor_us()),
      timed ? absl::StrCat(FormatDouble(100 * r.roofline().efficiency()), "%")
            : "-",
      // A decode step gives each sequence its next token.
      step ? FormatDouble(r.stats().median_us() / 1000.0, 3) : "-",
      step ? FormatDouble(
                 t.workload().batch_size() * 1e6 / r.stats().median_us(), 0)
           : "-",
      timed ? absl::StrFormat("%.1e", r.max_rel_error()) : "-",
      v1::TrialState_Name(t.state()),
      t.state() == v1::DONE ? ""
                            : (t.reason().empty() ? r.reason() : t.reason())};
}

}  // namespace

Table TrialsTable(const v1::QueryTrialsResponse& trials) {
  Table table;
  table.headers = {"trial",    "backend",    "tile",      "tpxep",  "graph",
                   "batch",    "ctx",        "median_us", "p90_us", "ci95_us",
                   "floor_us", "efficiency", "ms_tok",    "tok_s",  "rel_err",
                   "state",    "reason"};
  for (const v1::Trial& trial : trials.trials()) {
    table.rows.push_back(TrialRow(trial));
  }
  return table;
}

Table WorkersTable(const v1::ListWorkersResponse& workers) {
  Table table;
  table.headers = {"worker",        "device", "arch",
                   "read_GB/s",     "alive",  "available_backends",
                   "last_heartbeat"};
  for (const v1::WorkerInfo& w : workers.workers()) {
    std::string available;
    for (const v1::BackendProbe& b : w.probe().backends()) {
      if (b.available())
        absl::StrAppend(&available, available.empty() ? "" : ",", b.name());
    }
    table.rows.push_back(
        {w.worker_id(), w.probe().fingerprint().device_name(),
         w.probe().fingerprint().sm_arch(),
         FormatDouble(w.probe().device().measured_read_gbps()),
         w.alive() ? "yes" : "no", available.empty() ? "(none)" : available,
         absl::FormatTime("%Y-%m-%d %H:%M:%S",
                          absl::FromUnixMillis(w.last_heartbeat_unix_ms()),
                          absl::LocalTimeZone())});
  }
  return table;
}

Table ProbeTable(const v1::Probe& probe) {
  Table table;
  table.headers = {"backend", "available", "tiles", "reason"};
  for (const v1::BackendProbe& b : probe.backends()) {
    std::string tiles;
    for (const v1::TileShape& t : b.tiles()) {
      absl::StrAppend(&tiles, tiles.empty() ? "" : ",",
                      backends::TileText({t.block_n(), t.block_k()}));
    }
    table.rows.push_back({b.name(), b.available() ? "yes" : "no",
                          tiles.empty() ? "-" : tiles, b.reason()});
  }
  return table;
}

void PrintBest(std::ostream& out, const v1::GetBestResponse& best) {
  for (const v1::BestForWorkload& w : best.workloads()) {
    const v1::TimingStats& s = w.best().result().stats();
    out << "workload " << w.workload_hash() << " ("
        << w.workload().model_preset() << ", batch "
        << w.workload().batch_size() << ", context "
        << w.workload().context_length()
        << (w.workload().chain_layers() > 1
                ? absl::StrCat(", ", w.workload().chain_layers(),
                               " layers chained: figures per layer")
                : "")
        << ") on " << w.fingerprint().device_name() << " ["
        << w.fingerprint().hash() << "]\n";
    out << "  best:      trial " << w.best().trial_id() << "  "
        << ConfigCells(w.best().config()) << "  median "
        << FormatDouble(s.median_us()) << " us (95% CI "
        << FormatDouble(s.ci_low_us()) << "-" << FormatDouble(s.ci_high_us())
        << "), floor " << FormatDouble(w.best().result().roofline().floor_us())
        << " us, efficiency "
        << FormatDouble(100 * w.best().result().roofline().efficiency()) << "%"
        << (w.decided_by().empty() ? "" : "  [" + w.decided_by() + "]") << "\n";
    if (w.has_runner_up()) {
      out << "  runner-up: trial " << w.runner_up().trial_id() << "  "
          << ConfigCells(w.runner_up().config()) << "  median "
          << FormatDouble(w.runner_up().result().stats().median_us())
          << " us, margin " << FormatDouble(w.margin_us()) << " us"
          << (w.tie() ? "  (TIE: intervals overlap)" : "") << "\n";
    }
    if (w.tied_trial_ids_size() > 1) {
      out << "  tied trials:";
      for (int64_t id : w.tied_trial_ids()) out << " " << id;
      out << "\n";
    }
  }
  if (best.workloads().empty()) out << "no correct, timed trial to rank\n";
  for (const v1::ExcludedBackend& e : best.excluded()) {
    out << "  excluded:  " << e.backend() << ": " << e.reason() << "\n";
  }
}

std::string ProgressLine(const v1::SweepEvent& event) {
  const v1::Sweep& sweep = event.progress();
  int final_count = 0;
  for (const auto& [state, count] : sweep.trial_counts()) {
    if (state != "QUEUED" && state != "LEASED") final_count += count;
  }
  const v1::Trial& t = event.trial();
  std::string line = absl::StrCat(
      "[", final_count, "/", sweep.total_trials(), "] trial ", t.trial_id(),
      " ", ConfigCells(t.config()), " batch ", t.workload().batch_size(), ": ",
      v1::TrialState_Name(t.state()));
  if (t.state() == v1::DONE) {
    absl::StrAppend(&line, " ", FormatDouble(t.result().stats().median_us()),
                    " us");
  }
  return line;
}

void PrintJson(std::ostream& out, const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  out << json;
}

void PrintTrials(const v1::QueryTrialsResponse& trials, OutputFormat format) {
  if (format == OutputFormat::kJson) {
    PrintJson(std::cout, trials);
  } else {
    TrialsTable(trials).Print(std::cout, format);
  }
}

}  // namespace moetune::cli
