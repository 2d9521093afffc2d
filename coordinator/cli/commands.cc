#include "coordinator/cli/commands.h"

#include <iostream>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/log.h"
#include "coordinator/cli/session.h"
#include "coordinator/cli/views.h"
#include "coordinator/cli/worker_binary.h"
#include "proto/moetune.grpc.pb.h"

namespace moetune::cli {
namespace {

// The sweep a command is about: --sweep, or the newest one.
absl::StatusOr<int64_t> ResolveSweep(Session& session, int64_t sweep_id) {
  if (sweep_id != 0) return sweep_id;
  absl::StatusOr<v1::ListSweepsResponse> sweeps = Sweeps(session, 1);
  if (!sweeps.ok()) return sweeps.status();
  if (sweeps->sweeps().empty()) {
    return absl::NotFoundError("no sweep recorded yet");
  }
  return sweeps->sweeps(0).sweep_id();
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
  PrintTrials(*trials, options.format);
  return 0;
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
  } else {
    PrintBest(std::cout, *best);
  }
  return best->workloads().empty() ? 1 : 0;
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
    WorkersTable(response).Print(std::cout, options.format);
  }
  return 0;
}

Table SweepsTable(const v1::ListSweepsResponse& sweeps) {
  Table table;
  table.headers = {"sweep", "name", "state", "trials", "done", "created"};
  for (const v1::Sweep& s : sweeps.sweeps()) {
    auto done = s.trial_counts().find("DONE");
    table.rows.push_back(
        {absl::StrCat(s.sweep_id()), s.name(), v1::SweepState_Name(s.state()),
         absl::StrCat(s.total_trials()),
         absl::StrCat(done == s.trial_counts().end() ? 0 : done->second),
         absl::FormatTime("%Y-%m-%d %H:%M:%S",
                          absl::FromUnixMillis(s.created_at_unix_ms()),
                          absl::LocalTimeZone())});
  }
  return table;
}

int CmdSweeps(const CommandOptions& options) {
  absl::StatusOr<Session> session = Open(options, Access::kRead);
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<v1::ListSweepsResponse> response = Sweeps(*session, 0);
  if (!response.ok()) return Fail(response.status());
  if (options.format == OutputFormat::kJson) {
    PrintJson(std::cout, *response);
  } else {
    SweepsTable(*response).Print(std::cout, options.format);
  }
  return 0;
}

int CmdCancel(const CommandOptions& options) {
  if (options.sweep_id == 0) {
    return Fail(absl::InvalidArgumentError("--sweep: required for cancel"));
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

int CmdProbe(const CommandOptions& options) {
  absl::StatusOr<std::vector<std::string>> targets = ProbeTargets(options);
  if (!targets.ok()) return Fail(targets.status());
  for (const std::string& device : *targets) {
    absl::StatusOr<v1::Probe> probe =
        ProbeDevice(WorkerBinary(options.worker_binary), device);
    if (!probe.ok()) return Fail(probe.status());
    if (options.format == OutputFormat::kJson) {
      PrintJson(std::cout, *probe);
      continue;
    }
    std::cout << (device == "cpu" ? "cpu" : absl::StrCat("gpu ", device))
              << ": " << probe->fingerprint().device_name() << " ("
              << probe->fingerprint().sm_arch() << "), read "
              << FormatDouble(probe->device().measured_read_gbps())
              << " GB/s\n";
    ProbeTable(*probe).Print(std::cout, options.format);
  }
  return 0;
}

}  // namespace

int RunCommand(const std::string& command, const CommandOptions& options) {
  if (command == "sweep") return CmdSweep(options);
  if (command == "results") return CmdResults(options);
  if (command == "best") return CmdBest(options);
  if (command == "workers") return CmdWorkers(options);
  if (command == "sweeps") return CmdSweeps(options);
  if (command == "cancel") return CmdCancel(options);
  if (command == "probe") return CmdProbe(options);
  std::cerr
      << "moetune: unknown command '" << command
      << "'; allowed: sweep, sweeps, cancel, results, best, workers, probe\n";
  return 2;
}

}  // namespace moetune::cli
