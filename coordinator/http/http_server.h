// HttpServer: the coordinator's HTTP listener for dashboards (cpp-httplib):
//   GET  /healthz                        "ok"
//   GET  /metrics                        Prometheus text format (metrics.h)
//   GET|POST /moetune.v1.Moetune/METHOD  the public API as JSON
//   (api_gateway.h);
//        WatchSweep answers as Server-Sent Events, one SweepEvent each
//   GET  /...                            the page's static files
//   (static_files.h)
// Plain HTTP unless a certificate is given (then HTTPS with it). With bearer
// tokens enabled, /metrics needs a token of the read role as the API does;
// the static files hold no data and are served to anyone. Start and Stop
// from one thread; the handlers run on the library's thread pool.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/auth.h"
#include "coordinator/http/api_gateway.h"
#include "coordinator/http/metrics.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace moetune::coordinator::http {

struct HttpServerOptions {
  std::string listen;              // host:port; port 0 = any
  std::filesystem::path web_root;  // "" = no page, API and metrics only
  std::string tls_cert_file;       // both or neither: HTTPS
  std::string tls_key_file;
  // At most this many WatchSweep event streams at once; one more is refused
  // with 503. Each holds a thread of its own, and the server keeps
  // kRequestThreads more for everything else (health, metrics, the page,
  // the JSON API), so streams can never take them all.
  int max_streams = 64;
  // A keep-alive comment on each stream this often, so that a client that
  // left a quiet sweep is noticed and its slot freed.
  absl::Duration stream_ping = absl::Seconds(5);
};

class HttpServer {
 public:
  // INVALID_ARGUMENT for a malformed --http_listen, UNAVAILABLE when the
  // port cannot be bound. The pointers must outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const HttpServerOptions& options, const ApiGateway* gateway,
      CoordinatorMetrics* metrics, const Authorizer* auth);
  ~HttpServer();

  // "host:port" with the port actually bound.
  const std::string& address() const { return address_; }
  // Stops listening and ends open event streams; idempotent.
  void Stop();
  // Event streams open now.
  int open_streams() const { return open_streams_->load(); }

  // Threads kept beside the streams' for every other request.
  static constexpr int kRequestThreads = 16;

 private:
  HttpServer() = default;
  void Route(const HttpServerOptions& options);
  void ServeMetrics(const httplib::Request& req, httplib::Response& res);
  void StreamWatch(const httplib::Request& req, httplib::Response& res) const;

  std::unique_ptr<httplib::Server> server_;
  const ApiGateway* gateway_ = nullptr;
  CoordinatorMetrics* metrics_ = nullptr;
  const Authorizer* auth_ = nullptr;
  std::string address_;
  std::thread thread_;
  std::shared_ptr<std::atomic<bool>> stopping_ =
      std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<int>> open_streams_ =
      std::make_shared<std::atomic<int>>(0);
  int max_streams_ = 0;
  absl::Duration stream_ping_;
};

}  // namespace moetune::coordinator::http
