#include "coordinator/cli/views.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/text_bounds.h"
#include "google/protobuf/util/json_util.h"
#include "kernels/backends/descriptor.h"
#include "kernels/backends/tile_shape.h"
#include "tuner/config_key.h"

namespace moetune::cli {
namespace {

bool Timed(const v1::Trial& t) { return t.result().stats().samples() > 0; }

// A decode step gives each sequence its next token.
bool IsStep(const v1::Trial& t) {
  return Timed(t) && t.workload().region() == v1::DECODE_STEP &&
         t.result().stats().median_us() > 0;
}

std::string Reason(const v1::Trial& t) {
  if (t.state() == v1::DONE) return "";
  return t.reason().empty() ? t.result().reason() : t.reason();
}

// A decode step's time per token as a deployment would see it: the rank's
// measured step plus the communication its one-device median left out
// (modelled), which a real multi-GPU step pays.
double StepUs(const v1::TrialResult& r) {
  return r.stats().median_us() +
         (r.roofline().comm_modelled() ? r.roofline().comm_floor_us() : 0.0);
}

std::vector<std::string> HumanTrialRow(const v1::Trial& t) {
  const v1::TrialResult& r = t.result();
  const bool timed = Timed(t), step = IsStep(t);
  const auto cell = [timed](double v, int precision = 1) {
    return timed ? FormatDouble(v, precision) : std::string("-");
  };
  return {
      absl::StrCat(t.trial_id()),
      t.config().moe_backend(),
      tuner::TileText(t.config()),
      absl::StrCat(t.config().tp(), "x", t.config().ep(),
                   tuner::IsDpAttention(t.config()) ? " dp-attn" : ""),
      t.config().cuda_graph() ? "on" : "off",
      absl::StrCat(t.workload().batch_size()),
      absl::StrCat(t.workload().context_length()),
      cell(r.stats().median_us()),
      cell(r.stats().p90_us()),
      timed ? absl::StrCat(FormatDouble(r.stats().ci_low_us()), "-",
                           FormatDouble(r.stats().ci_high_us()))
            : "-",
      cell(r.roofline().floor_us()),
      timed ? absl::StrCat(FormatDouble(100 * r.roofline().efficiency()), "%")
            : "-",
      step ? FormatDouble(StepUs(r) / 1000.0, 3) : "-",
      step ? FormatDouble(t.workload().batch_size() * 1e6 / StepUs(r), 0) : "-",
      timed ? absl::StrFormat("%.1e", r.max_rel_error()) : "-",
      v1::TrialState_Name(t.state()),
      Reason(t)};
}

std::vector<std::string> MachineTrialRow(const v1::Trial& t) {
  const v1::TrialResult& r = t.result();
  const bool timed = Timed(t), step = IsStep(t);
  const auto cell = [timed](double v) {
    return timed ? RawNumber(v) : std::string();
  };
  return {absl::StrCat(t.trial_id()),
          absl::StrCat(t.sweep_id()),
          t.workload_hash(),
          t.config().moe_backend(),
          tuner::TileText(t.config()),
          absl::StrCat(t.config().tp()),
          absl::StrCat(t.config().ep()),
          t.config().cuda_graph() ? "true" : "false",
          tuner::AttentionName(t.config()),
          absl::StrCat(t.workload().batch_size()),
          absl::StrCat(t.workload().context_length()),
          absl::StrCat(t.rung()),
          cell(r.stats().median_us()),
          cell(r.stats().p90_us()),
          cell(r.stats().ci_low_us()),
          cell(r.stats().ci_high_us()),
          cell(r.roofline().floor_us()),
          cell(r.roofline().efficiency()),
          step ? RawNumber(StepUs(r) / 1000.0) : "",
          step ? RawNumber(t.workload().batch_size() * 1e6 / StepUs(r)) : "",
          cell(r.max_rel_error()),
          v1::TrialState_Name(t.state()),
          Reason(t)};
}

}  // namespace

std::string ConfigCells(const v1::TrialConfig& c) {
  return tuner::ConfigText(c);
}

Table TrialsTable(const v1::QueryTrialsResponse& trials, OutputFormat format) {
  Table table;
  const bool machine = IsMachineFormat(format);
  if (machine) {
    table.headers = {
        "trial",      "sweep",    "workload_hash", "backend",   "tile",
        "tp",         "ep",       "graph",         "attention", "batch",
        "ctx",        "rung",     "median_us",     "p90_us",    "ci_low_us",
        "ci_high_us", "floor_us", "efficiency",    "ms_tok",    "tok_s",
        "rel_err",    "state",    "reason"};
  } else {
    table.headers = {"trial",    "backend",    "tile",      "tpxep",  "graph",
                     "batch",    "ctx",        "median_us", "p90_us", "ci95_us",
                     "floor_us", "efficiency", "ms_tok",    "tok_s",  "rel_err",
                     "state",    "reason"};
  }
  for (const v1::Trial& trial : trials.trials()) {
    table.rows.push_back(machine ? MachineTrialRow(trial)
                                 : HumanTrialRow(trial));
  }
  return table;
}

Table NarrowTrialsTable(const v1::QueryTrialsResponse& trials) {
  return Columns(TrialsTable(trials, OutputFormat::kTable),
                 {"trial", "backend", "tile", "tpxep", "graph", "batch", "ctx",
                  "median_us", "ci95_us", "efficiency", "tok_s", "state"},
                 {{"efficiency", "eff"}});
}

std::string TrialReasons(const v1::QueryTrialsResponse& trials) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<int64_t>> ids;  // reason -> trials
  for (const v1::Trial& t : trials.trials()) {
    const std::string reason = EscapeForTerminal(Reason(t));
    if (reason.empty()) continue;
    if (ids[reason].empty()) order.push_back(reason);
    ids[reason].push_back(t.trial_id());
  }
  std::string text;
  for (const std::string& reason : order) {
    std::string line =
        absl::StrCat(ids[reason].size() == 1 ? "trial " : "trials ",
                     absl::StrJoin(ids[reason], ", "), ": ", reason);
    if (line.size() > kNarrowWidth) {
      line = line.substr(0, kNarrowWidth - 3) + "...";
    }
    absl::StrAppend(&text, line, "\n");
  }
  return text;
}

void PrintTrials(std::ostream& out, const v1::QueryTrialsResponse& trials,
                 OutputFormat format, bool wide) {
  if (format == OutputFormat::kJson) {
    PrintJson(out, trials);
  } else if (format == OutputFormat::kTable && !wide) {
    NarrowTrialsTable(trials).Print(out, format);
    const std::string reasons = TrialReasons(trials);
    if (!reasons.empty()) out << "\nwhy:\n" << reasons;
  } else {
    TrialsTable(trials, format).Print(out, format);
  }
}

Table WorkersTable(const v1::ListWorkersResponse& workers,
                   OutputFormat format) {
  const bool machine = IsMachineFormat(format);
  Table table;
  table.headers = {"worker",
                   "name",
                   "device",
                   "arch",
                   machine ? "read_gbps" : "read_GB/s",
                   "alive",
                   "available_backends",
                   "last_heartbeat"};
  for (const v1::WorkerInfo& w : workers.workers()) {
    std::string available;
    for (const v1::BackendProbe& b : w.probe().backends()) {
      if (b.available())
        absl::StrAppend(&available, available.empty() ? "" : " ", b.name());
    }
    const double gbps = w.probe().device().measured_read_gbps();
    table.rows.push_back(
        {w.worker_id(), w.name(), w.probe().fingerprint().device_name(),
         w.probe().fingerprint().sm_arch(),
         machine ? RawNumber(gbps) : FormatDouble(gbps),
         machine ? (w.alive() ? "true" : "false") : (w.alive() ? "yes" : "no"),
         available.empty() && !machine ? "(none)" : available,
         UtcTime(w.last_heartbeat_unix_ms())});
  }
  return table;
}

Table SweepsTable(const v1::ListSweepsResponse& sweeps, OutputFormat format) {
  Table table;
  table.headers = {"sweep", "name",   "state",   "trials",
                   "done",  "failed", "created", "finished"};
  for (const v1::Sweep& s : sweeps.sweeps()) {
    int done = 0, failed = 0;
    for (const auto& [state, count] : s.trial_counts()) {
      if (state == "DONE") done += count;
      if (state == "FAILED" || state == "INCORRECT" || state == "TIMEOUT")
        failed += count;
    }
    table.rows.push_back(
        {absl::StrCat(s.sweep_id()), s.name(), v1::SweepState_Name(s.state()),
         absl::StrCat(s.total_trials()), absl::StrCat(done),
         absl::StrCat(failed), UtcTime(s.created_at_unix_ms()),
         s.finished_at_unix_ms() > 0 ? UtcTime(s.finished_at_unix_ms())
         : IsMachineFormat(format)   ? ""
                                     : "-"});
  }
  return table;
}

Table ProbeTable(const v1::Probe& probe) {
  Table table;
  table.headers = {"backend", "available", "tiles", "reason"};
  for (const v1::BackendProbe& b : probe.backends()) {
    std::string tiles;
    for (const v1::TileShape& t : b.tiles()) {
      absl::StrAppend(&tiles, tiles.empty() ? "" : " ",
                      backends::TileText(backends::TileOf(t)));
    }
    table.rows.push_back({b.name(), b.available() ? "yes" : "no",
                          tiles.empty() ? "-" : tiles, b.reason()});
  }
  return table;
}

std::string PluginDetails(const v1::Probe& probe) {
  std::string text;
  for (const v1::BackendProbe& b : probe.backends()) {
    if (b.plugin().empty()) continue;
    absl::StrAppend(&text, "  ", b.name(), ": plugin ", b.plugin(), "\n");
    absl::StrAppend(
        &text, "    versions: ",
        b.versions().empty() ? "-" : absl::StrJoin(b.versions(), ", "), "\n");
    if (b.error_bound() > 0) {
      absl::StrAppend(&text, "    error bound: ", RawNumber(b.error_bound()),
                      b.error_bound_why().empty()
                          ? ""
                          : absl::StrCat(" (", b.error_bound_why(), ")"),
                      "\n");
    }
    if (!b.available()) {
      absl::StrAppend(&text, "    unavailable: ", b.reason(), "\n");
    }
  }
  return text.empty() ? "" : absl::StrCat("plugin backends:\n", text);
}

Table ProbesTable(
    const std::vector<std::pair<std::string, v1::Probe>>& probes) {
  Table table;
  table.headers = {"device",   "device_name", "arch",        "read_gbps",
                   "backend",  "available",   "tiles",       "reason",
                   "versions", "plugin",      "error_bound", "error_bound_why"};
  for (const auto& [device, probe] : probes) {
    const Table backends = ProbeTable(probe);
    for (int i = 0; i < probe.backends_size(); ++i) {
      const std::vector<std::string>& row = backends.rows[i];
      const v1::BackendProbe& b = probe.backends(i);
      table.rows.push_back(
          {device, probe.fingerprint().device_name(),
           probe.fingerprint().sm_arch(),
           RawNumber(probe.device().measured_read_gbps()), row[0],
           row[1] == "yes" ? "true" : "false", row[2] == "-" ? "" : row[2],
           row[3], absl::StrJoin(b.versions(), "; "), b.plugin(),
           b.error_bound() > 0 ? RawNumber(b.error_bound()) : "",
           b.error_bound_why()});
    }
  }
  return table;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

void PrintJson(std::ostream& out, const google::protobuf::Message& message) {
  out << ToJson(message);
}

}  // namespace moetune::cli
