#include "coordinator/cli/commands.h"

#include <iostream>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/log.h"
#include "coordinator/cli/local_cluster.h"
#include "coordinator/cli/spec_file.h"
#include "coordinator/cli/views.h"
#include "coordinator/cli/worker_binary.h"
#include "proto/moetune.grpc.pb.h"

namespace moetune::cli {
namespace {

struct Session {
  std::unique_ptr<LocalCluster> cluster;  // null when remote
  std::unique_ptr<v1::Moetune::Stub> stub;
};

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

int Fail(const absl::Status& status) {
  std::cerr << "moetune: " << status.message() << "\n";
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

// --gpus, or what the worker binary finds (none when it cannot run: a CPU
// worker is started, and its own start reports the problem).
int LocalGpuCount(const CommandOptions& options) {
  if (options.gpus >= 0) return options.gpus;
  absl::StatusOr<int> count = CountGpus(WorkerBinary(options.worker_binary));
  return count.ok() ? *count : 0;
}

absl::StatusOr<Session> Open(const CommandOptions& options, bool with_workers) {
  Session session;
  std::string address = options.coordinator;
  if (address.empty()) {
    // The embedded coordinator's chatter would drown the table.
    SetLogLevel(LogLevel::kWarning);
    LocalClusterOptions local;
    local.db_path = options.db_path;
    local.start_workers = with_workers;
    local.worker_binary = options.worker_binary;
    local.gpu_count = with_workers ? LocalGpuCount(options) : 0;
    absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
        LocalCluster::Start(local);
    if (!cluster.ok()) return cluster.status();
    session.cluster = *std::move(cluster);
    address = session.cluster->address();
  }
  session.stub = v1::Moetune::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  return session;
}

// The sweep a command is about: --sweep, or the newest one.
absl::StatusOr<int64_t> ResolveSweep(Session& session, int64_t sweep_id) {
  if (sweep_id != 0) return sweep_id;
  grpc::ClientContext context;
  v1::ListSweepsRequest request;
  request.set_limit(1);
  v1::ListSweepsResponse response;
  absl::Status status =
      FromGrpc(session.stub->ListSweeps(&context, request, &response));
  if (!status.ok()) return status;
  if (response.sweeps().empty())
    return absl::NotFoundError("no sweep recorded yet");
  return response.sweeps(0).sweep_id();
}

// Streams progress to stderr until the sweep ends.
absl::Status WatchToEnd(Session& session, int64_t sweep_id) {
  grpc::ClientContext context;
  v1::WatchSweepRequest request;
  request.set_sweep_id(sweep_id);
  auto reader = session.stub->WatchSweep(&context, request);
  v1::SweepEvent event;
  while (reader->Read(&event)) {
    if (event.has_trial()) std::cerr << ProgressLine(event) << std::endl;
  }
  return FromGrpc(reader->Finish());
}

absl::StatusOr<v1::QueryTrialsResponse> Trials(Session& session,
                                               const v1::TrialFilter& filter) {
  grpc::ClientContext context;
  v1::QueryTrialsResponse response;
  absl::Status status =
      FromGrpc(session.stub->QueryTrials(&context, filter, &response));
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::GetBestResponse> Best(Session& session,
                                         const v1::GetBestRequest& request) {
  grpc::ClientContext context;
  v1::GetBestResponse response;
  absl::Status status =
      FromGrpc(session.stub->GetBest(&context, request, &response));
  if (!status.ok()) return status;
  return response;
}

void PrintTrials(const v1::QueryTrialsResponse& trials, OutputFormat format) {
  if (format == OutputFormat::kJson) {
    PrintJson(std::cout, trials);
  } else {
    TrialsTable(trials).Print(std::cout, format);
  }
}

bool AnyDone(const v1::QueryTrialsResponse& trials) {
  for (const v1::Trial& trial : trials.trials()) {
    if (trial.state() == v1::DONE) return true;
  }
  return false;
}

absl::StatusOr<int64_t> Submit(Session& session, const v1::SweepSpec& spec) {
  grpc::ClientContext context;
  v1::SubmitSweepRequest request;
  *request.mutable_spec() = spec;
  v1::SubmitSweepResponse response;
  absl::Status status =
      FromGrpc(session.stub->SubmitSweep(&context, request, &response));
  if (!status.ok()) return status;
  std::cerr << "sweep " << response.sweep_id() << ": " << response.trial_count()
            << " trials" << std::endl;
  return response.sweep_id();
}

int CmdSweep(const CommandOptions& options) {
  if (options.spec_path.empty()) {
    return Fail(absl::InvalidArgumentError("--spec: required for sweep"));
  }
  absl::StatusOr<v1::SweepSpec> spec = LoadSweepSpec(options.spec_path);
  if (!spec.ok()) return Fail(spec.status());
  absl::StatusOr<Session> session = Open(options, options.coordinator.empty());
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<int64_t> sweep_id = Submit(*session, *spec);
  if (!sweep_id.ok()) return Fail(sweep_id.status());
  if (absl::Status s = WatchToEnd(*session, *sweep_id); !s.ok()) return Fail(s);
  v1::TrialFilter filter;
  filter.set_sweep_id(*sweep_id);
  absl::StatusOr<v1::QueryTrialsResponse> trials = Trials(*session, filter);
  if (!trials.ok()) return Fail(trials.status());
  PrintTrials(*trials, options.format);
  v1::GetBestRequest best_request;
  best_request.set_sweep_id(*sweep_id);
  absl::StatusOr<v1::GetBestResponse> best = Best(*session, best_request);
  if (best.ok() && options.format == OutputFormat::kTable) {
    std::cout << "\n";
    PrintBest(std::cout, *best);
  }
  if (!AnyDone(*trials)) {
    std::cerr << "moetune: no trial succeeded\n";
    return 1;
  }
  return 0;
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
  // Flags are checked before anything is opened.
  absl::StatusOr<Session> session = Open(options, false);
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<v1::QueryTrialsResponse> trials = Trials(*session, filter);
  if (!trials.ok()) return Fail(trials.status());
  PrintTrials(*trials, options.format);
  return 0;
}

int CmdBest(const CommandOptions& options) {
  absl::StatusOr<Session> session = Open(options, false);
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
  absl::StatusOr<Session> session = Open(options, false);
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
  absl::StatusOr<Session> session = Open(options, false);
  if (!session.ok()) return Fail(session.status());
  grpc::ClientContext context;
  v1::ListSweepsResponse response;
  absl::Status status = FromGrpc(
      session->stub->ListSweeps(&context, v1::ListSweepsRequest(), &response));
  if (!status.ok()) return Fail(status);
  if (options.format == OutputFormat::kJson) {
    PrintJson(std::cout, response);
  } else {
    SweepsTable(response).Print(std::cout, options.format);
  }
  return 0;
}

int CmdCancel(const CommandOptions& options) {
  if (options.sweep_id == 0) {
    return Fail(absl::InvalidArgumentError("--sweep: required for cancel"));
  }
  absl::StatusOr<Session> session = Open(options, false);
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
