// What the CLI shows: API messages turned into tables (and, for --format
// json, into protobuf JSON). A table (--format table) is for reading:
// rounded figures, percentages, "-" for what was not measured. CSV is for
// programs: raw numbers, the interval as ci_low_us / ci_high_us, efficiency
// as a fraction, empty cells for what was not measured. The columns are
// documented in docs/cli.md. Pure functions.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/cli/table.h"
#include "google/protobuf/message.h"
#include "proto/moetune.pb.h"

namespace moetune::cli {

// Every column (the text table's --wide form).
Table TrialsTable(const v1::QueryTrialsResponse& trials,
                  OutputFormat format = OutputFormat::kTable);
// The text table's default form, for 120 columns: without p90_us,
// floor_us, ms_tok, rel_err and reason, efficiency as "eff".
Table NarrowTrialsTable(const v1::QueryTrialsResponse& trials);
// Under the narrow table: one line per reason a trial is not DONE, with the
// trials it holds for ("trials 4, 11: fused_gemv unavailable: ..."), each
// line cut to 120 characters.
std::string TrialReasons(const v1::QueryTrialsResponse& trials);
// The trials as a table (narrow unless `wide`), CSV, or JSON.
void PrintTrials(std::ostream& out, const v1::QueryTrialsResponse& trials,
                 OutputFormat format, bool wide = false);
Table WorkersTable(const v1::ListWorkersResponse& workers, OutputFormat format);
Table SweepsTable(const v1::ListSweepsResponse& sweeps, OutputFormat format);
// One device's backends (table format: printed under a heading line).
Table ProbeTable(const v1::Probe& probe);
// The out-of-process backends of a probe (BackendProbe.plugin set), for
// under its table: each one's plugin command, the versions it found, its
// error bound and why, and the reason when it is unavailable. "" when the
// probe has none.
std::string PluginDetails(const v1::Probe& probe);
// Every probed device's backends in one table with the device's columns
// (CSV: one header, then rows; nothing before it). The plugin columns
// (versions, "; "-separated, plugin, error_bound, error_bound_why) come
// last and are empty for native backends.
Table ProbesTable(const std::vector<std::pair<std::string, v1::Probe>>& probes);
// tuner::ConfigText: "backend tile tpN epM [dp-attn] [graph] [oneshot]
// [measured]".
std::string ConfigCells(const v1::TrialConfig& config);
// Protobuf JSON with the proto field names, for --format json.
void PrintJson(std::ostream& out, const google::protobuf::Message& message);
std::string ToJson(const google::protobuf::Message& message);

}  // namespace moetune::cli
