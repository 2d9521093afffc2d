#include "coordinator/cli/session.h"

#include <sys/random.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/rpc/channel.h"
#include "common/status_macros.h"
#include "coordinator/cli/worker_binary.h"

namespace moetune::cli {
namespace {

// --gpus, or what the worker binary finds (none when it cannot run: a CPU
// worker is started, and its own start reports the problem).
int LocalGpuCount(const CommandOptions& options) {
  if (options.gpus >= 0) return options.gpus;
  absl::StatusOr<int> count = CountGpus(WorkerBinary(options.worker_binary));
  return count.ok() ? *count : 0;
}

absl::StatusOr<std::unique_ptr<LocalCluster>> StartLocal(
    const CommandOptions& options, Access access) {
  const bool with_workers = access == Access::kWriteWithWorkers;
  std::error_code error;
  if (!with_workers && !std::filesystem::exists(options.db_path, error)) {
    return absl::NotFoundError(absl::StrCat(
        "--db: '", options.db_path,
        "' does not exist; only sweep creates a database (or name a running "
        "coordinator with --coordinator)"));
  }
  LocalClusterOptions local;
  local.db_path = options.db_path;
  local.start_workers = with_workers;
  local.read_only = access == Access::kRead;
  local.worker_binary = options.worker_binary;
  local.gpu_count = with_workers ? LocalGpuCount(options) : 0;
  local.comm_calibration = options.comm_calibration;
  return LocalCluster::Start(local);
}

std::string NewRequestId() {
  std::string bytes(16, '\0');
  while (getrandom(bytes.data(), bytes.size(), 0) !=
         static_cast<ssize_t>(bytes.size())) {
  }
  return absl::BytesToHexString(bytes);
}

}  // namespace

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

int Fail(const absl::Status& status) {
  std::cerr << "moetune: " << status.message() << "\n";
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

int FailFormat(const CommandOptions& options) {
  return Fail(absl::InvalidArgumentError(absl::StrCat(
      "--format: '", FormatName(options.format), "' is not allowed for ",
      options.command, "; allowed: table, csv, json")));
}

absl::StatusOr<Session> Open(const CommandOptions& options, Access access) {
  Session session;
  std::string address = options.coordinator;
  rpc::ChannelOptions channel;
  if (address.empty()) {
    absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
        StartLocal(options, access);
    if (!cluster.ok()) return cluster.status();
    session.cluster = *std::move(cluster);
    address = session.cluster->address();
  } else {
    channel.tls_ca_file = options.tls_ca;
    absl::StatusOr<std::string> token = rpc::ReadToken(options.token_file);
    if (!token.ok()) return token.status();
    channel.token = *token;
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> made =
      rpc::MakeChannel(address, channel);
  if (!made.ok()) return made.status();
  session.stub = v1::Moetune::NewStub(*made);
  return session;
}

absl::StatusOr<v1::QueryTrialsResponse> Trials(Session& session,
                                               v1::TrialFilter filter) {
  v1::QueryTrialsResponse all;
  do {
    grpc::ClientContext context;
    v1::QueryTrialsResponse page;
    RETURN_IF_ERROR(
        FromGrpc(session.stub->QueryTrials(&context, filter, &page)));
    for (v1::Trial& trial : *page.mutable_trials()) {
      *all.add_trials() = std::move(trial);
    }
    filter.set_page_token(page.next_page_token());
  } while (!filter.page_token().empty());
  return all;
}

absl::StatusOr<v1::ListSweepsResponse> Sweeps(Session& session, int limit) {
  v1::ListSweepsRequest request;
  request.set_limit(limit);
  v1::ListSweepsResponse all;
  do {
    grpc::ClientContext context;
    v1::ListSweepsResponse page;
    RETURN_IF_ERROR(
        FromGrpc(session.stub->ListSweeps(&context, request, &page)));
    for (v1::Sweep& sweep : *page.mutable_sweeps()) {
      *all.add_sweeps() = std::move(sweep);
    }
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  return all;
}

absl::StatusOr<v1::Sweep> GetSweep(Session& session, int64_t sweep_id) {
  grpc::ClientContext context;
  v1::GetSweepRequest request;
  request.set_sweep_id(sweep_id);
  v1::Sweep sweep;
  RETURN_IF_ERROR(FromGrpc(session.stub->GetSweep(&context, request, &sweep)));
  return sweep;
}

absl::StatusOr<int64_t> ResolveSweep(Session& session, int64_t sweep_id) {
  if (sweep_id != 0) return sweep_id;
  ASSIGN_OR_RETURN(const v1::ListSweepsResponse sweeps, Sweeps(session, 1));
  if (sweeps.sweeps().empty()) {
    return absl::NotFoundError("no sweep recorded yet");
  }
  return sweeps.sweeps(0).sweep_id();
}

absl::StatusOr<v1::GetBestResponse> Best(Session& session,
                                         const v1::GetBestRequest& request) {
  grpc::ClientContext context;
  v1::GetBestResponse response;
  RETURN_IF_ERROR(
      FromGrpc(session.stub->GetBest(&context, request, &response)));
  return response;
}

absl::StatusOr<v1::SubmitSweepResponse> Submit(Session& session,
                                               const v1::SweepSpec& spec) {
  v1::SubmitSweepRequest request;
  *request.mutable_spec() = spec;
  request.set_request_id(NewRequestId());
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(60));
    v1::SubmitSweepResponse response;
    const grpc::Status status =
        session.stub->SubmitSweep(&context, request, &response);
    const bool transient =
        status.error_code() == grpc::StatusCode::UNAVAILABLE ||
        status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!transient || attempt == 5) {
      RETURN_IF_ERROR(FromGrpc(status));
      return response;
    }
    std::cerr << "moetune: submit: " << status.error_message()
              << "; retrying (same request id)" << std::endl;
    std::this_thread::sleep_for(std::chrono::seconds(attempt));
  }
}

}  // namespace moetune::cli
