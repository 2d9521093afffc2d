#include "coordinator/cli/compare_report.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_text.h"
#include "coordinator/cli/views.h"
#include "google/protobuf/struct.pb.h"
#include "tuner/config_key.h"

namespace moetune::cli {
namespace {

std::string Percent(double fraction) {
  return absl::StrFormat("%+.1f%%", 100 * fraction);
}

// "123.4 (120.0-125.1)", or the state when not DONE, or "-".
std::string HumanSide(const Side& side) {
  if (!side.present) return "-";
  if (side.state != v1::DONE) return v1::TrialState_Name(side.state);
  return absl::StrCat(FormatDouble(side.stats.median_us()), " (",
                      FormatDouble(side.stats.ci_low_us()), "-",
                      FormatDouble(side.stats.ci_high_us()), ")");
}

// The median alone (the narrow table: the verdict already says whether
// the intervals overlap), or the state when not DONE, or "-".
std::string HumanMedian(const Side& side) {
  if (!side.present) return "-";
  if (side.state != v1::DONE) return v1::TrialState_Name(side.state);
  return FormatDouble(side.stats.median_us());
}

std::string HumanEfficiency(const Side& side) {
  return side.state == v1::DONE
             ? absl::StrCat(FormatDouble(100 * side.efficiency), "%")
             : "-";
}

bool BothTimed(const ConfigComparison& row) {
  return row.baseline.state == v1::DONE && row.target.state == v1::DONE;
}

std::string Note(const ConfigComparison& row) {
  std::string note = row.regression ? "REGRESSION" : "";
  const std::string& reason =
      row.target.reason.empty() ? row.baseline.reason : row.target.reason;
  if (!reason.empty()) absl::StrAppend(&note, note.empty() ? "" : ": ", reason);
  return note;
}

std::vector<std::string> NarrowRow(const ConfigComparison& row) {
  return {row.workload.model_preset(),
          absl::StrCat(row.workload.batch_size()),
          absl::StrCat(row.workload.context_length()),
          ConfigCells(row.config),
          HumanMedian(row.baseline),
          HumanMedian(row.target),
          BothTimed(row) ? Percent(row.change) : "-",
          VerdictName(row.verdict),
          Note(row)};
}

std::vector<std::string> HumanRow(const ConfigComparison& row) {
  const std::string note = Note(row);
  return {row.workload.model_preset(),
          absl::StrCat(row.workload.batch_size()),
          absl::StrCat(row.workload.context_length()),
          row.device,
          ConfigCells(row.config),
          HumanSide(row.baseline),
          HumanSide(row.target),
          BothTimed(row) ? Percent(row.change) : "-",
          HumanEfficiency(row.baseline),
          HumanEfficiency(row.target),
          VerdictName(row.verdict),
          note};
}

void AppendSide(std::vector<std::string>& cells, const Side& side) {
  const bool timed = side.state == v1::DONE;
  const auto raw = [timed](double v) { return timed ? RawNumber(v) : ""; };
  cells.insert(cells.end(),
               {side.present ? absl::StrCat(side.trial_id) : "",
                side.present ? v1::TrialState_Name(side.state) : "",
                raw(side.stats.median_us()), raw(side.stats.ci_low_us()),
                raw(side.stats.ci_high_us()), raw(side.floor_us),
                raw(side.efficiency), side.build_hash});
}

std::vector<std::string> MachineRow(const ConfigComparison& row) {
  std::vector<std::string> cells = {row.workload_hash,
                                    row.workload.model_preset(),
                                    absl::StrCat(row.workload.batch_size()),
                                    absl::StrCat(row.workload.context_length()),
                                    row.device,
                                    row.config.moe_backend(),
                                    tuner::TileText(row.config),
                                    absl::StrCat(row.config.tp()),
                                    absl::StrCat(row.config.ep()),
                                    row.config.cuda_graph() ? "true" : "false",
                                    tuner::AttentionName(row.config)};
  AppendSide(cells, row.baseline);
  AppendSide(cells, row.target);
  cells.push_back(BothTimed(row) ? RawNumber(row.change) : "");
  cells.push_back(VerdictName(row.verdict));
  cells.push_back(row.regression ? "true" : "false");
  return cells;
}

}  // namespace

// The text table's default form, for 120 columns: medians without their
// intervals, no device or efficiencies, the note cut.
Table NarrowComparisonTable(const ComparisonReport& report) {
  Table table;
  table.headers = {"preset",    "batch",  "ctx",     "config", "baseline_us",
                   "target_us", "change", "verdict", "note"};
  for (const ConfigComparison& row : report.configs) {
    table.rows.push_back(NarrowRow(row));
  }
  table.max_width = kNarrowWidth;
  return table;
}

Table ComparisonTable(const ComparisonReport& report, OutputFormat format) {
  Table table;
  if (IsMachineFormat(format)) {
    table.headers = {"workload_hash", "preset", "batch", "ctx", "device",
                     "backend",       "tile",   "tp",    "ep",  "graph",
                     "attention"};
    for (const char* side : {"baseline", "target"}) {
      for (const char* column :
           {"trial", "state", "median_us", "ci_low_us", "ci_high_us",
            "floor_us", "efficiency", "build"}) {
        table.headers.push_back(absl::StrCat(side, "_", column));
      }
    }
    table.headers.insert(table.headers.end(),
                         {"change", "verdict", "regression"});
  } else {
    table.headers = {"preset",
                     "batch",
                     "ctx",
                     "device",
                     "config",
                     "baseline_us (95% CI)",
                     "target_us (95% CI)",
                     "change",
                     "eff_baseline",
                     "eff_target",
                     "verdict",
                     "note"};
  }
  for (const ConfigComparison& row : report.configs) {
    table.rows.push_back(IsMachineFormat(format) ? MachineRow(row)
                                                 : HumanRow(row));
  }
  return table;
}

namespace {

std::string SweepText(const v1::Sweep& sweep) {
  return absl::StrCat("sweep ", sweep.sweep_id(), " '", sweep.name(), "' (",
                      UtcTime(sweep.created_at_unix_ms()), ")");
}

// "config: median (interval)"; narrow: "config: median".
std::string BestText(const ConfigComparison* row, const Side& side, bool wide) {
  if (row == nullptr) return "-";
  return absl::StrCat(ConfigCells(row->config), ": ",
                      wide ? HumanSide(side) : HumanMedian(side));
}

// Narrow (not `wide`): no device column, the winners' medians without
// their intervals.
Table WorkloadsTable(const ComparisonReport& report, bool wide) {
  Table table;
  table.headers = {"preset", "batch", "ctx"};
  if (wide) table.headers.push_back("device");
  table.headers.insert(
      table.headers.end(),
      {"baseline winner (us)", "target winner (us)", "change", "verdict"});
  for (const WorkloadComparison& w : report.workloads) {
    const bool both = w.baseline_best != nullptr && w.target_best != nullptr;
    std::vector<std::string> cells = {
        w.workload.model_preset(), absl::StrCat(w.workload.batch_size()),
        absl::StrCat(w.workload.context_length())};
    if (wide) cells.push_back(w.device);
    cells.insert(
        cells.end(),
        {BestText(w.baseline_best,
                  w.baseline_best ? w.baseline_best->baseline : Side(), wide),
         BestText(w.target_best, w.target_best ? w.target_best->target : Side(),
                  wide),
         both ? Percent(w.change) : "-", VerdictName(w.verdict)});
    table.rows.push_back(std::move(cells));
  }
  return table;
}

void AppendBest(std::vector<std::string>& cells, const ConfigComparison* row,
                const Side* side) {
  if (row == nullptr) {
    cells.insert(cells.end(), {"", "", "", "", ""});
    return;
  }
  cells.insert(
      cells.end(),
      {ConfigCells(row->config), absl::StrCat(side->trial_id),
       RawNumber(side->stats.median_us()), RawNumber(side->stats.ci_low_us()),
       RawNumber(side->stats.ci_high_us())});
}

// The winners per workload with raw numbers (JSON).
Table WorkloadsMachineTable(const ComparisonReport& report) {
  Table table;
  table.headers = {"workload_hash", "preset", "batch", "ctx", "device"};
  for (const char* side : {"baseline", "target"}) {
    for (const char* column :
         {"config", "trial", "median_us", "ci_low_us", "ci_high_us"}) {
      table.headers.push_back(absl::StrCat(side, "_", column));
    }
  }
  table.headers.insert(table.headers.end(), {"change", "verdict"});
  for (const WorkloadComparison& w : report.workloads) {
    std::vector<std::string> cells = {
        w.workload_hash, w.workload.model_preset(),
        absl::StrCat(w.workload.batch_size()),
        absl::StrCat(w.workload.context_length()), w.device};
    AppendBest(cells, w.baseline_best,
               w.baseline_best ? &w.baseline_best->baseline : nullptr);
    AppendBest(cells, w.target_best,
               w.target_best ? &w.target_best->target : nullptr);
    const bool both = w.baseline_best != nullptr && w.target_best != nullptr;
    cells.push_back(both ? RawNumber(w.change) : "");
    cells.push_back(VerdictName(w.verdict));
    table.rows.push_back(std::move(cells));
  }
  return table;
}

std::string Summary(const ReportHeader& header,
                    const ComparisonReport& report) {
  int faster = 0, slower = 0, same = 0, failing = 0;
  for (const ConfigComparison& row : report.configs) {
    faster += row.verdict == Verdict::kFaster;
    slower += row.verdict == Verdict::kSlower;
    same += row.verdict == Verdict::kSame;
    failing += row.verdict == Verdict::kNowFailing;
  }
  std::string text = absl::StrCat(
      report.compared, " configs compared: ", faster, " faster, ", slower,
      " slower, ", same, " same within noise, ", failing, " now failing");
  if (header.threshold_pct >= 0) {
    absl::StrAppend(&text, "; ", report.regressions,
                    " slower beyond noise by more than ",
                    FormatDouble(header.threshold_pct), "% or now failing");
  }
  return text;
}

// Why no winner was set beside another.
std::string NothingComparedText(const ComparisonReport& report) {
  return report.would_match_across_builds
             ? "none compared: no config was measured by the same build on "
               "both sides (the builds differ); pass --across_builds to "
               "compare them"
             : "none compared: no config was measured on the same device "
               "and software on both sides";
}

void PrintReadable(std::ostream& out, const ReportHeader& header,
                   const ComparisonReport& report, OutputFormat format,
                   bool wide) {
  const bool md = format == OutputFormat::kMarkdown;
  out << (md ? "# moetune compare\n\n" : "")
      << "target:   " << SweepText(header.target) << (md ? "  \n" : "\n")
      << "baseline: " << SweepText(header.baseline)
      << (header.across_builds ? " (across builds)" : "")
      << (md ? "  \n" : "\n");
  for (const auto& [device, gbps] : report.floor_gbps) {
    if (gbps <= 0) continue;
    out << "floor bandwidth: " << device.substr(0, device.find('|')) << " "
        << FormatDouble(gbps) << " GB/s (the best recorded for the device)"
        << (md ? "  \n" : "\n");
  }
  // The verdict first: what a CI reader opens the report for.
  out << "\n"
      << (md ? "**" : "") << Summary(header, report) << (md ? "**\n" : "\n");
  out << "\n" << (md ? "## Winners\n\n" : "winners per workload:\n");
  if (report.compared == 0) {
    out << NothingComparedText(report) << "\n";
  } else {
    WorkloadsTable(report, wide).Print(out, format);
  }
  out << "\n" << (md ? "## Configs\n\n" : "configs:\n");
  (wide ? ComparisonTable(report, format) : NarrowComparisonTable(report))
      .Print(out, format);
}

google::protobuf::Value Number(double v) {
  google::protobuf::Value value;
  value.set_number_value(v);
  return value;
}

google::protobuf::Value Text(const std::string& s) {
  google::protobuf::Value value;
  value.set_string_value(s);
  return value;
}

bool IsNumericColumn(const std::string& header) {
  for (const char* suffix :
       {"_us", "efficiency", "change", "trial", "batch", "ctx", "tp", "ep"}) {
    if (absl::EndsWith(header, suffix)) return true;
  }
  return false;
}

// A table's rows as JSON objects keyed by its (machine) headers; numeric
// cells as numbers, empty cells left out.
google::protobuf::Value RowsAsJson(const Table& table) {
  google::protobuf::Value list;
  list.mutable_list_value();  // an empty table is [], not null
  for (const std::vector<std::string>& row : table.rows) {
    google::protobuf::Value object;
    auto& fields = *object.mutable_struct_value()->mutable_fields();
    for (size_t c = 0; c < row.size(); ++c) {
      if (row[c].empty()) continue;
      double number = 0;
      const bool numeric = IsNumericColumn(table.headers[c]) &&
                           absl::SimpleAtod(row[c], &number);
      if (row[c] == "true" || row[c] == "false") {
        fields[table.headers[c]].set_bool_value(row[c] == "true");
      } else {
        fields[table.headers[c]] = numeric ? Number(number) : Text(row[c]);
      }
    }
    *list.mutable_list_value()->add_values() = std::move(object);
  }
  return list;
}

void PrintJsonReport(std::ostream& out, const ReportHeader& header,
                     const ComparisonReport& report) {
  google::protobuf::Struct root;
  auto& f = *root.mutable_fields();
  f["target_sweep"] = Number(header.target.sweep_id());
  f["baseline_sweep"] = Number(header.baseline.sweep_id());
  f["name"] = Text(header.target.name());
  f["across_builds"].set_bool_value(header.across_builds);
  f["threshold_pct"] = Number(header.threshold_pct);
  f["compared"] = Number(report.compared);
  f["regressions"] = Number(report.regressions);
  auto& floors = *f["floor_gbps"].mutable_struct_value()->mutable_fields();
  for (const auto& [device, gbps] : report.floor_gbps) {
    floors[device] = Number(gbps);
  }
  f["workloads"] = RowsAsJson(WorkloadsMachineTable(report));
  f["configs"] = RowsAsJson(ComparisonTable(report, OutputFormat::kJson));
  google::protobuf::Value document;
  *document.mutable_struct_value() = std::move(root);
  out << JsonText(document) << "\n";
}

}  // namespace

void PrintComparison(std::ostream& out, const ReportHeader& header,
                     const ComparisonReport& report, OutputFormat format,
                     bool wide) {
  if (format == OutputFormat::kCsv) {
    ComparisonTable(report, format).Print(out, format);
  } else if (format == OutputFormat::kJson) {
    PrintJsonReport(out, header, report);
  } else {
    // A Markdown report is a page, not a terminal: every column.
    PrintReadable(out, header, report, format,
                  wide || format == OutputFormat::kMarkdown);
  }
}

}  // namespace moetune::cli
