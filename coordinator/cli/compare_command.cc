// `moetune compare`: the regression report of one sweep against a baseline
// (compare.h has the rules), printed in --format and optionally written as
// Markdown and JSON files for a CI job to attach.
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/cli/commands.h"
#include "coordinator/cli/compare.h"
#include "coordinator/cli/compare_report.h"
#include "coordinator/cli/session.h"
#include "coordinator/device_bandwidth.h"

namespace moetune::cli {
namespace {

// --baseline, or the newest finished sweep of the same name before target.
absl::StatusOr<v1::Sweep> ResolveBaseline(Session& session,
                                          const v1::Sweep& target,
                                          int64_t baseline_id) {
  if (baseline_id == target.sweep_id()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--baseline: ", baseline_id, " is the sweep being compared"));
  }
  if (baseline_id != 0) return GetSweep(session, baseline_id);
  ASSIGN_OR_RETURN(const v1::ListSweepsResponse sweeps, Sweeps(session, 0));
  for (const v1::Sweep& sweep : sweeps.sweeps()) {  // newest first
    if (sweep.sweep_id() < target.sweep_id() && sweep.name() == target.name() &&
        sweep.state() == v1::FINISHED) {
      return sweep;
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "no finished sweep named '", target.name(), "' before sweep ",
      target.sweep_id(), "; name a baseline with --baseline"));
}

absl::StatusOr<std::vector<v1::Trial>> SweepTrials(Session& session,
                                                   int64_t sweep_id) {
  v1::TrialFilter filter;
  filter.set_sweep_id(sweep_id);
  filter.set_include_samples(true);  // configs measured twice are pooled
  ASSIGN_OR_RETURN(v1::QueryTrialsResponse trials, Trials(session, filter));
  return std::vector<v1::Trial>(trials.trials().begin(), trials.trials().end());
}

// From every registered worker's probe: the best bandwidth per kind of
// device, and where each worker ran.
absl::Status NoteWorkers(Session& session, CompareOptions* options) {
  grpc::ClientContext context;
  v1::ListWorkersResponse workers;
  RETURN_IF_ERROR(FromGrpc(
      session.stub->ListWorkers(&context, v1::ListWorkersRequest(), &workers)));
  for (const v1::WorkerInfo& worker : workers.workers()) {
    const v1::Fingerprint& fp = worker.probe().fingerprint();
    double& gbps = options->probed_gbps[coordinator::DeviceKind(fp)];
    gbps = std::max(gbps, worker.probe().device().measured_read_gbps());
    options->worker_fingerprints[worker.worker_id()] = fp;
  }
  return absl::OkStatus();
}

absl::Status WriteReport(const std::string& path, const ReportHeader& header,
                         const ComparisonReport& report, OutputFormat format) {
  if (path.empty()) return absl::OkStatus();
  std::ofstream file(path);
  PrintComparison(file, header, report, format);
  file.close();
  if (!file) {
    return absl::UnavailableError(absl::StrCat("cannot write '", path, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ComparisonReport> BuildReport(Session& session,
                                             const CommandOptions& options,
                                             ReportHeader* header) {
  ASSIGN_OR_RETURN(const int64_t target_id,
                   ResolveSweep(session, options.sweep_id));
  ASSIGN_OR_RETURN(header->target, GetSweep(session, target_id));
  ASSIGN_OR_RETURN(
      header->baseline,
      ResolveBaseline(session, header->target, options.baseline_sweep_id));
  header->across_builds = options.across_builds;
  header->threshold_pct = options.threshold_pct;
  ASSIGN_OR_RETURN(const std::vector<v1::Trial> baseline,
                   SweepTrials(session, header->baseline.sweep_id()));
  ASSIGN_OR_RETURN(const std::vector<v1::Trial> target,
                   SweepTrials(session, target_id));
  CompareOptions compare;
  compare.across_builds = options.across_builds;
  compare.threshold_pct = options.threshold_pct;
  RETURN_IF_ERROR(NoteWorkers(session, &compare));
  return Compare(baseline, target, compare);
}

int ExitCodeFor(const ReportHeader& header, const ComparisonReport& report) {
  if (report.compared == 0) {
    std::cerr << "moetune: nothing in common between sweep "
              << header.target.sweep_id() << " and baseline sweep "
              << header.baseline.sweep_id()
              << (report.would_match_across_builds
                      ? ": their builds differ; add --across_builds"
                      : " on the same device and software")
              << "\n";
    return 1;
  }
  if (report.regressions > 0) {
    std::cerr << "moetune: " << report.regressions
              << " regressions beyond noise and --threshold\n";
    return 3;
  }
  return 0;
}

}  // namespace

int CmdCompare(const CommandOptions& options) {
  absl::StatusOr<Session> session = Open(options, Access::kRead);
  if (!session.ok()) return Fail(session.status());
  ReportHeader header;
  absl::StatusOr<ComparisonReport> report =
      BuildReport(*session, options, &header);
  if (!report.ok()) return Fail(report.status());
  PrintComparison(std::cout, header, *report, options.format, options.wide);
  for (const absl::Status& written :
       {WriteReport(options.markdown_out, header, *report,
                    OutputFormat::kMarkdown),
        WriteReport(options.json_out, header, *report, OutputFormat::kJson)}) {
    if (!written.ok()) return Fail(written);
  }
  return ExitCodeFor(header, *report);
}

}  // namespace moetune::cli
