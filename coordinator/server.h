// CoordinatorServer: the store, worker registry, scheduler and both gRPC
// services (plus health and reflection) behind one listening address, and a
// background thread that expires lapsed leases. Used by moetune-coordinator,
// by the CLI's embedded mode and by in-process tests (listen on port 0).
// Start/Shutdown from one thread; the accessors are thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/registry.h"
#include "coordinator/scheduler.h"
#include "coordinator/service.h"
#include "db/store.h"
#include "grpcpp/grpcpp.h"

namespace moetune::coordinator {

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";  // host:port; port 0 = any free
  std::string db_path = "moetune.db";
  SchedulerOptions scheduler;
};

class CoordinatorServer {
 public:
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      const ServerOptions& options, const Clock* clock);
  ~CoordinatorServer();

  // "host:port" with the port actually bound.
  const std::string& address() const { return address_; }
  db::Store* store() { return store_.get(); }
  Scheduler* scheduler() { return scheduler_.get(); }
  void Shutdown();
  void Wait();

 private:
  CoordinatorServer() = default;
  void ExpiryLoop();

  std::unique_ptr<db::Store> store_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<MoetuneService> public_service_;
  std::unique_ptr<WorkerControlService> worker_service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int64_t expiry_period_ms_ = 1000;
  std::atomic<bool> stopping_{false};
  std::thread expiry_thread_;
};

}  // namespace moetune::coordinator
