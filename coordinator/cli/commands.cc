#include "coordinator/cli/commands.h"

#include <iostream>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/log.h"
#include "coordinator/cli/best_view.h"
#include "coordinator/cli/session.h"
#include "coordinator/cli/usage.h"
#include "coordinator/cli/views.h"
#include "coordinator/cli/worker_binary.h"
#include "proto/moetune.grpc.pb.h"

namespace moetune::cli {
namespace {

// Listings print their header even when empty (a valid empty CSV), and say
// so with exit 1: "nothing found" is the same code for every command.
int ListedExit(int rows, const char* what) {
  if (rows > 0) return 0;
  std::cerr << "moetune: no " << what << " found\n";
  return 1;
}

int CmdResults(const CommandOptions& options) {
  v1::TrialFilter filter;
  if (!options.state.empty()) {
    v1::TrialState state;
    if (!v1::TrialState_Parse(options.state, &state)) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "--state: '", options.state,
          "' is not allowed; allowed: QUEUED, "
          "LEASED, DONE, FAILED, INCORRECT, UNAVAILABLE, CANCELLED, TIMEOUT")));
    }
    filter.set_state(state);
  }
  filter.set_sweep_id(options.sweep_id);
  filter.set_moe_backend(options.backend);
  filter.set_workload_hash(options.workload_hash);
  filter.set_limit(options.limit);
  filter.set_include_samples(options.samples);
  // Flags are checked before anything is opened.
  absl::StatusOr<Session> session = Open(options, Access::kRead);
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<v1::QueryTrialsResponse> trials = Trials(*session, filter);
  if (!trials.ok()) return Fail(trials.status());
  PrintTrials(std::cout, *trials, options.format, options.wide);
  return ListedExit(trials->trials_size(), "trials");
}

int CmdBest(const CommandOptions& options) {
  absl::StatusOr<Session> session = Open(options, Access::kRead);
  if (!session.ok()) return Fail(session.status());
  v1::GetBestRequest request;
  if (options.workload_hash.empty()) {
    absl::StatusOr<int64_t> sweep_id = ResolveSweep(*session, options.sweep_id);
    if (!sweep_id.ok()) return Fail(sweep_id.status());
    request.set_sweep_id(*sweep_id);
  }
  request.set_workload_hash(options.workload_hash);
  absl::StatusOr<v1::GetBestResponse> best = Best(*session, request);
  if (!best.ok()) return Fail(best.status());
  if (options.format == OutputFormat::kJson) {
    PrintJson(std::cout, *best);
  } else if (options.format == OutputFormat::kCsv) {
    BestTable(*best).Print(std::cout, options.format);
  } else {
    PrintBest(std::cout, *best);
  }
  return ListedExit(best->workloads_size(), "winner (no correct, timed trial)");
}

int CmdWorkers(const CommandOptions& options) {
  absl::StatusOr<Session> session = Open(options, Access::kRead);
  if (!session.ok()) return Fail(session.status());
  grpc::ClientContext context;
  v1::ListWorkersResponse response;
  absl::Status status = FromGrpc(session->stub->ListWorkers(
      &context, v1::ListWorkersRequest(), &response));
  if (!status.ok()) return Fail(status);
  if (options.format == OutputFormat::kJson) {
    PrintJson(std::cout, response);
  } else {
    WorkersTable(response, options.format).Print(std::cout, options.format);
  }
  return ListedExit(response.workers_size(), "workers");
}

int CmdSweeps(const CommandOptions& options) {
  absl::StatusOr<Session> session = Open(options, Access::kRead);
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<v1::ListSweepsResponse> response = Sweeps(*session, 0);
  if (!response.ok()) return Fail(response.status());
  if (options.format == OutputFormat::kJson) {
    PrintJson(std::cout, *response);
  } else {
    SweepsTable(*response, options.format).Print(std::cout, options.format);
  }
  return ListedExit(response->sweeps_size(), "sweeps");
}

int CmdCancel(const CommandOptions& options) {
  // Cancelling is not undone: "the latest sweep" could be one somebody
  // else started a moment ago, so cancel takes only a sweep named by id.
  if (options.sweep_id <= 0) {
    return Fail(absl::InvalidArgumentError(
        "--sweep: required for cancel: the id of the sweep to cancel "
        "(moetune sweeps lists them); cancel never picks the latest sweep"));
  }
  absl::StatusOr<Session> session = Open(options, Access::kWrite);
  if (!session.ok()) return Fail(session.status());
  grpc::ClientContext context;
  v1::CancelSweepRequest request;
  request.set_sweep_id(options.sweep_id);
  v1::Sweep response;
  absl::Status status =
      FromGrpc(session->stub->CancelSweep(&context, request, &response));
  if (!status.ok()) return Fail(status);
  std::cout << "sweep " << response.sweep_id() << ": "
            << v1::SweepState_Name(response.state()) << "\n";
  return 0;
}

// "cpu", an ordinal, or for "all" the CPU and every GPU the worker sees.
absl::StatusOr<std::vector<std::string>> ProbeTargets(
    const CommandOptions& options) {
  int ordinal = 0;
  if (options.device == "cpu" ||
      (absl::SimpleAtoi(options.device, &ordinal) && ordinal >= 0)) {
    return std::vector<std::string>{options.device};
  }
  if (options.device != "all") {
    return absl::InvalidArgumentError(
        absl::StrCat("--device: '", options.device,
                     "' is not allowed; allowed: cpu, all, 0, 1, ..."));
  }
  absl::StatusOr<int> gpus = CountGpus(WorkerBinary(options.worker_binary));
  if (!gpus.ok()) return gpus.status();
  std::vector<std::string> targets = {"cpu"};
  for (int i = 0; i < *gpus; ++i) targets.push_back(absl::StrCat(i));
  return targets;
}

void PrintProbes(const std::vector<std::pair<std::string, v1::Probe>>& probes,
                 OutputFormat format) {
  if (format == OutputFormat::kCsv) {
    ProbesTable(probes).Print(std::cout, format);
    return;
  }
  if (format == OutputFormat::kJson) {
    // One document: an array of the probes, in device order.
    std::cout << "[";
    for (size_t i = 0; i < probes.size(); ++i) {
      std::cout << (i == 0 ? "\n" : ",\n") << ToJson(probes[i].second);
    }
    std::cout << "]\n";
    return;
  }
  for (const auto& [device, probe] : probes) {
    std::cout << (device == "cpu" ? "cpu" : absl::StrCat("gpu ", device))
              << ": " << probe.fingerprint().device_name() << " ("
              << probe.fingerprint().sm_arch() << "), read "
              << FormatDouble(probe.device().measured_read_gbps()) << " GB/s\n";
    ProbeTable(probe).Print(std::cout, format);
    std::cout << PluginDetails(probe);
  }
}

// The worker's plugin flags, as the probe was asked for them.
std::vector<std::string> PluginFlags(const CommandOptions& options) {
  std::vector<std::string> flags;
  if (!options.plugins.empty()) {
    flags.push_back(absl::StrCat("--plugins=", options.plugins));
  }
  if (!options.model_library.empty()) {
    flags.push_back(absl::StrCat("--model_library=", options.model_library));
  }
  return flags;
}

int CmdProbe(const CommandOptions& options) {
  absl::StatusOr<std::vector<std::string>> targets = ProbeTargets(options);
  if (!targets.ok()) return Fail(targets.status());
  std::vector<std::pair<std::string, v1::Probe>> probes;
  for (const std::string& device : *targets) {
    absl::StatusOr<v1::Probe> probe = ProbeDevice(
        WorkerBinary(options.worker_binary), device, PluginFlags(options));
    if (!probe.ok()) return Fail(probe.status());
    probes.emplace_back(device, *std::move(probe));
  }
  PrintProbes(probes, options.format);
  return 0;
}

}  // namespace

int RunCommand(const std::string& command, const CommandOptions& options) {
  // compare reads markdown; export says itself which formats it takes.
  if (options.format == OutputFormat::kMarkdown && command != "compare" &&
      command != "export" && CommandUsage(command).has_value()) {
    return FailFormat(options);
  }
  if (command == "sweep") return CmdSweep(options);
  if (command == "compare") return CmdCompare(options);
  if (command == "export") return CmdExport(options);
  if (command == "results") return CmdResults(options);
  if (command == "best") return CmdBest(options);
  if (command == "workers") return CmdWorkers(options);
  if (command == "sweeps") return CmdSweeps(options);
  if (command == "cancel") return CmdCancel(options);
  if (command == "probe") return CmdProbe(options);
  std::cerr << "moetune: unknown command '" << command
            << "'; allowed: " << CommandNames() << "\n";
  return 2;
}

}  // namespace moetune::cli
