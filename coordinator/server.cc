#include "coordinator/server.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"

namespace moetune::coordinator {
namespace {

// "host:port" -> "host"; the bound port is appended by the caller.
std::string HostOf(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  return colon == std::string::npos ? listen : listen.substr(0, colon);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const ServerOptions& options, const Clock* clock) {
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer());
  ASSIGN_OR_RETURN(server->store_, db::Store::Open(options.db_path));
  server->registry_ =
      std::make_unique<WorkerRegistry>(clock, options.scheduler.lease_ms);
  server->scheduler_ = std::make_unique<Scheduler>(
      server->store_.get(), server->registry_.get(), clock, options.scheduler);
  RETURN_IF_ERROR(server->scheduler_->ResumeSweeps());
  server->public_service_ = std::make_unique<MoetuneService>(
      server->store_.get(), server->scheduler_.get(), server->registry_.get(),
      clock);
  server->worker_service_ =
      std::make_unique<WorkerControlService>(server->scheduler_.get());
  // Health answers through reflection too: health.proto is linked in.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(server->public_service_.get());
  builder.RegisterService(server->worker_service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("--listen: could not listen on ", options.listen));
  }
  server->address_ = absl::StrCat(HostOf(options.listen), ":", port);
  // Often enough that a lapsed lease or a trial nobody can run is noticed
  // well inside one lease.
  server->expiry_period_ms_ =
      std::clamp<int64_t>(options.scheduler.lease_ms / 4, 50, 500);
  server->expiry_thread_ = std::thread([s = server.get()] { s->ExpiryLoop(); });
  LogInfo("coordinator listening on ", server->address_, ", db ",
          options.db_path);
  return server;
}

void CoordinatorServer::ExpiryLoop() {
  while (!stopping_) {
    absl::Status status = scheduler_->ExpireLeases();
    if (status.ok()) status = scheduler_->MarkUnavailableTrials();
    if (!status.ok()) LogWarning("scheduler tick: ", status.ToString());
    for (int64_t waited = 0; waited < expiry_period_ms_ && !stopping_;
         waited += 20) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

void CoordinatorServer::Shutdown() {
  if (stopping_.exchange(true)) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (expiry_thread_.joinable()) expiry_thread_.join();
}

void CoordinatorServer::Wait() { server_->Wait(); }

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

}  // namespace moetune::coordinator
