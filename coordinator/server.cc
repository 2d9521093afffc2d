#include "coordinator/server.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/rpc/channel.h"
#include "common/status_macros.h"
#include "coordinator/http/rpc_metrics_interceptor.h"
#include "coordinator/listen_address.h"
#include "coordinator/parse_failure_interceptor.h"
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

// TLS for a listener when a certificate is given (requiring client
// certificates signed by `client_ca` when it is non-empty), else plain.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(
    const TlsServerOptions& tls, bool require_client_cert) {
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert / --tls_key: give both (the certificate chain and its "
        "key) or neither");
  }
  if (tls.cert_file.empty()) {
    if (require_client_cert) {
      return absl::InvalidArgumentError(
          "--tls_client_ca: needs --tls_cert and --tls_key (mutual TLS "
          "is TLS)");
    }
    return grpc::InsecureServerCredentials();
  }
  ASSIGN_OR_RETURN(const std::string cert,
                   rpc::ReadFileForFlag(tls.cert_file, "--tls_cert"));
  ASSIGN_OR_RETURN(const std::string key,
                   rpc::ReadFileForFlag(tls.key_file, "--tls_key"));
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({key, cert});
  if (require_client_cert) {
    ASSIGN_OR_RETURN(
        ssl.pem_root_certs,
        rpc::ReadFileForFlag(tls.client_ca_file, "--tls_client_ca"));
    ssl.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

// One listener: `service` (and health) on `listen`, never sharing its port
// with another process (no SO_REUSEPORT).
// Every unary call is timed into `metrics` (moetune_rpc_duration_seconds);
// a request that cannot be parsed is answered INVALID_ARGUMENT.
absl::StatusOr<std::unique_ptr<grpc::Server>> BuildServer(
    const std::string& listen, const std::string& flag,
    std::shared_ptr<grpc::ServerCredentials> credentials,
    grpc::Service* service, http::CoordinatorMetrics* metrics,
    const Clock* clock, std::string* bound) {
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(
      std::make_unique<http::RpcMetricsInterceptorFactory>(metrics, clock));
  interceptors.push_back(std::make_unique<ParseFailureInterceptorFactory>());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  int port = 0;
  builder.AddListeningPort(listen, credentials, &port);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat(
        flag, ": cannot listen on ", listen,
        " (the port is in use, or the address is not this host's)"));
  }
  *bound = absl::StrCat(HostOf(listen), ":", port);
  return server;
}

}  // namespace

absl::Status CoordinatorServer::OpenState(const ServerOptions& options,
                                          const Clock* clock) {
  if (!options.tokens_file.empty()) {
    ASSIGN_OR_RETURN(auth_, Authorizer::Load(options.tokens_file));
  }
  db::OpenOptions open;
  open.writer = !options.read_only;
  open.owner = db::DescribeThisProcess("moetune-coordinator (starting)");
  ASSIGN_OR_RETURN(store_, db::Store::Open(options.db_path, open));
  registry_ =
      std::make_unique<WorkerRegistry>(clock, options.scheduler.lease_ms);
  scheduler_ = std::make_unique<Scheduler>(store_.get(), registry_.get(), clock,
                                           options.scheduler);
  if (!options.read_only) {
    RETURN_IF_ERROR(scheduler_->RestoreWorkers());
    RETURN_IF_ERROR(scheduler_->ResumeSweeps());
  }
  public_service_ = std::make_unique<MoetuneService>(
      store_.get(), scheduler_.get(), registry_.get(), clock, &auth_,
      options.read_only ? options.db_path : "");
  worker_service_ =
      std::make_unique<WorkerControlService>(scheduler_.get(), &auth_);
  metrics_source_ = std::make_unique<http::StoreMetricsSource>(
      store_.get(), clock, options.scheduler.lease_ms);
  metrics_->SetSource(metrics_source_.get());
  scheduler_->SetResultObserver(
      [metrics = metrics_.get()](const std::string& worker_name,
                                 const v1::TrialResult& result) {
        metrics->ObserveTrial(worker_name, result.wall_s());
      });
  return absl::OkStatus();
}

absl::Status CoordinatorServer::Listen(const ServerOptions& options,
                                       const ListenerCredentials& credentials) {
  // Health answers through reflection too: health.proto is linked in.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  ASSIGN_OR_RETURN(
      server_,
      BuildServer(options.listen, "--listen", credentials.public_api,
                  public_service_.get(), metrics_.get(), clock_, &address_));
  RETURN_IF_ERROR(ListenHttp(options));
  if (options.read_only) return absl::OkStatus();
  ASSIGN_OR_RETURN(worker_server_,
                   BuildServer(options.worker_listen, "--worker_listen",
                               credentials.workers, worker_service_.get(),
                               metrics_.get(), clock_, &worker_address_));
  return store_->SetOwner(db::DescribeThisProcess(
      absl::StrCat("moetune-coordinator listening on ", address_,
                   " (workers: ", worker_address_, ")")));
}

// The HTTP API calls the public service through an in-process channel: the
// same handlers, tokens and errors as a gRPC client, and no TLS or network
// hop in between.
absl::Status CoordinatorServer::ListenHttp(const ServerOptions& options) {
  if (options.http.listen.empty()) return absl::OkStatus();
  gateway_ = std::make_unique<http::ApiGateway>(
      server_->InProcessChannel(grpc::ChannelArguments()),
      options.http.allow_writes && !options.read_only);
  http::HttpServerOptions http_options;
  http_options.listen = options.http.listen;
  http_options.web_root = options.http.web_root;
  http_options.tls_cert_file = options.tls.cert_file;
  http_options.tls_key_file = options.tls.key_file;
  http_options.max_streams = options.http.max_streams;
  http_options.stream_ping = options.http.stream_ping;
  ASSIGN_OR_RETURN(http_server_,
                   http::HttpServer::Start(http_options, gateway_.get(),
                                           metrics_.get(), &auth_));
  http_address_ = http_server_->address();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const ServerOptions& options, const Clock* clock) {
  RETURN_IF_ERROR(CheckListenAddress(options.listen, "--listen"));
  RETURN_IF_ERROR(CheckListenAddress(options.worker_listen, "--worker_listen"));
  if (!options.http.listen.empty()) {
    RETURN_IF_ERROR(CheckListenAddress(options.http.listen, "--http_listen"));
  }
  // Every flag is checked (the certificates read) before the database is
  // opened: a bad flag creates or changes nothing.
  ListenerCredentials credentials;
  ASSIGN_OR_RETURN(credentials.public_api, Credentials(options.tls, false));
  ASSIGN_OR_RETURN(
      credentials.workers,
      Credentials(options.tls, !options.tls.client_ca_file.empty()));
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer());
  server->clock_ = clock;
  RETURN_IF_ERROR(server->OpenState(options, clock));
  RETURN_IF_ERROR(server->Listen(options, credentials));
  // Often enough that a lapsed lease or a trial nobody can run is noticed
  // well inside one lease.
  server->expiry_period_ms_ =
      std::clamp<int64_t>(options.scheduler.lease_ms / 4, 50, 500);
  if (!options.read_only) {
    server->expiry_thread_ =
        std::thread([s = server.get()] { s->ExpiryLoop(); });
  }
  LogInfo("coordinator listening on ", server->address_, " (workers on ",
          server->worker_address_, ")",
          server->http_address_.empty()
              ? ""
              : absl::StrCat(", HTTP on ", server->http_address_),
          ", db ", options.db_path,
          server->auth_.enabled() ? ", bearer tokens required" : "");
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

void CoordinatorServer::Shutdown(int grace_ms) {
  if (stopping_.exchange(true)) return;
  const auto deadline =
      std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms);
  // Watches end now; calls still running at the deadline are cancelled.
  if (public_service_ != nullptr) public_service_->Stop();
  // After the watches are told to end: the HTTP server waits for its
  // handlers, and an event stream's handler is a watch.
  if (http_server_ != nullptr) http_server_->Stop();
  if (server_ != nullptr) server_->Shutdown(deadline);
  if (worker_server_ != nullptr) worker_server_->Shutdown(deadline);
  if (expiry_thread_.joinable()) expiry_thread_.join();
}

void CoordinatorServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

}  // namespace moetune::coordinator
