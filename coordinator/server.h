// CoordinatorServer: the store, worker registry, scheduler and both gRPC
// services behind two listeners -- the public API (Moetune, plus health and
// reflection) and WorkerControl on its own address -- each optionally TLS
// (mutual TLS for workers) and behind bearer tokens (auth.h), and a
// background thread that expires lapsed leases; optionally an HTTP listener
// for dashboards (the API as JSON, /metrics, the page). Used by
// moetune-coordinator, by the CLI's embedded mode and by in-process tests
// (listen on port 0). Start/Shutdown from one thread; the accessors are
// thread-safe.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/auth.h"
#include "coordinator/http/api_gateway.h"
#include "coordinator/http/http_server.h"
#include "coordinator/http/metrics.h"
#include "coordinator/http/store_metrics_source.h"
#include "coordinator/registry.h"
#include "coordinator/scheduler.h"
#include "coordinator/service.h"
#include "db/store.h"
#include "grpcpp/grpcpp.h"

namespace moetune::coordinator {

struct TlsServerOptions {
  // Both or neither: the server's certificate chain and key (PEM), used on
  // both listeners.
  std::string cert_file;
  std::string key_file;
  // Non-empty: workers must present a client certificate signed by this CA
  // (mutual TLS on the worker listener).
  std::string client_ca_file;
};

// The HTTP listener for dashboards (http/http_server.h); off when `listen`
// is empty.
struct HttpOptions {
  std::string listen;              // host:port; "" = no HTTP
  std::filesystem::path web_root;  // the page's files; "" = no page
  // SubmitSweep and CancelSweep over HTTP (still behind the write role).
  bool allow_writes = false;
  int max_streams = 64;  // WatchSweep event streams at once (http_server.h)
  absl::Duration stream_ping = absl::Seconds(5);  // keep-alive on a stream
};

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";         // public API; port 0 = any
  std::string worker_listen = "127.0.0.1:50052";  // WorkerControl
  std::string db_path = "moetune.db";
  SchedulerOptions scheduler;
  TlsServerOptions tls;
  std::string tokens_file;  // "" = every call allowed (auth.h)
  // Serves the database's records only: opened read-only (no writer lock,
  // so beside a running coordinator or on a read-only mount), no worker
  // listener, no lease expiry; SubmitSweep and CancelSweep are refused.
  bool read_only = false;
  HttpOptions http;
};

class CoordinatorServer {
 public:
  // Every refusal is one line naming the flag or path and the cause; nothing
  // is written to the database before it is known to be ours.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      const ServerOptions& options, const Clock* clock);
  ~CoordinatorServer();

  // "host:port" with the ports actually bound.
  const std::string& address() const { return address_; }
  const std::string& worker_address() const { return worker_address_; }
  // "" when HTTP is off.
  const std::string& http_address() const { return http_address_; }
  db::Store* store() { return store_.get(); }
  Scheduler* scheduler() { return scheduler_.get(); }
  // Stops accepting calls, ends the streams and the expiry thread; returns
  // within about `grace_ms` whatever the load.
  void Shutdown(int grace_ms = 1000);
  void Wait();

 private:
  CoordinatorServer() = default;
  absl::Status OpenState(const ServerOptions& options, const Clock* clock);
  struct ListenerCredentials {
    std::shared_ptr<grpc::ServerCredentials> public_api, workers;
  };
  absl::Status Listen(const ServerOptions& options,
                      const ListenerCredentials& credentials);
  absl::Status ListenHttp(const ServerOptions& options);
  void ExpiryLoop();

  Authorizer auth_;
  const Clock* clock_ = nullptr;
  // Before the listeners (their interceptors record into it), after them
  // the source it reads.
  std::unique_ptr<http::CoordinatorMetrics> metrics_ =
      std::make_unique<http::CoordinatorMetrics>();
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<MoetuneService> public_service_;
  std::unique_ptr<WorkerControlService> worker_service_;
  std::unique_ptr<grpc::Server> server_;         // public API
  std::unique_ptr<grpc::Server> worker_server_;  // WorkerControl
  std::unique_ptr<http::StoreMetricsSource> metrics_source_;
  std::unique_ptr<http::ApiGateway> gateway_;
  std::unique_ptr<http::HttpServer> http_server_;
  std::string address_, worker_address_, http_address_;
  int64_t expiry_period_ms_ = 1000;
  std::atomic<bool> stopping_{false};
  std::thread expiry_thread_;
};

}  // namespace moetune::coordinator
