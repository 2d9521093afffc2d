#include "coordinator/http/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/http/static_files.h"
#include "coordinator/listen_address.h"

namespace moetune::coordinator::http {
namespace {

constexpr char kApiPrefix[] = "/moetune.v1.Moetune/";
constexpr size_t kMaxBodyBytes = 4 << 20;

void Send(const HttpReply& reply, httplib::Response& response) {
  response.status = reply.status;
  response.set_content(reply.body, reply.content_type.c_str());
}

// "host:port" -> host without IPv6 brackets, and the port.
std::pair<std::string, int> SplitListen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = 0;
  (void)absl::SimpleAtoi(listen.substr(colon + 1), &port);
  return {host, port};
}

// "Bearer TOKEN" -> TOKEN; anything else -> "".
std::string BearerToken(const std::string& authorization) {
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWithIgnoreCase(authorization, kBearer)) return "";
  return authorization.substr(kBearer.size());
}

QueryParams ParamsOf(const httplib::Request& request) {
  return QueryParams(request.params.begin(), request.params.end());
}

// Binds `listen` (port 0: any free one); returns "host:port" as bound.
absl::StatusOr<std::string> Bind(httplib::Server& server,
                                 const std::string& listen) {
  const auto [host, port] = SplitListen(listen);
  const int bound = port == 0 ? server.bind_to_any_port(host)
                              : (server.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    return absl::UnavailableError(absl::StrCat(
        "--http_listen: cannot listen on ", listen,
        " (the port is in use, or the address is not this host's)"));
  }
  return absl::StrCat(listen.substr(0, listen.rfind(':')), ":", bound);
}

absl::StatusOr<std::unique_ptr<httplib::Server>> MakeServer(
    const HttpServerOptions& options) {
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert / --tls_key: give both or neither");
  }
  if (options.tls_cert_file.empty()) {
    return std::make_unique<httplib::Server>();
  }
  auto server = std::make_unique<httplib::SSLServer>(
      options.tls_cert_file.c_str(), options.tls_key_file.c_str());
  if (!server->is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_cert / --tls_key: ", options.tls_cert_file, " and ",
        options.tls_key_file, " are not a usable certificate and key"));
  }
  return server;
}

void ServeStatic(const std::filesystem::path& root, const std::string& path,
                 httplib::Response& response) {
  absl::StatusOr<StaticFile> file = ResolveStaticFile(root, path);
  absl::StatusOr<std::string> bytes =
      file.ok() ? ReadStaticFile(*file) : file.status();
  if (!bytes.ok()) {
    // The reason stays in the log: it may name the server's own paths.
    LogInfo("http: ", path, ": ", bytes.status().message());
    return Send(ErrorReply(grpc::StatusCode::NOT_FOUND, "no such page"),
                response);
  }
  // The page loads only its own files and talks only to its own origin.
  response.set_header("Content-Security-Policy",
                      "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                      "img-src 'self' data:; frame-ancestors 'none'");
  response.set_header("X-Content-Type-Options", "nosniff");
  response.set_content(*std::move(bytes), file->content_type.c_str());
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const HttpServerOptions& options, const ApiGateway* gateway,
    CoordinatorMetrics* metrics, const Authorizer* auth) {
  RETURN_IF_ERROR(CheckListenAddress(options.listen, "--http_listen"));
  std::error_code error;
  if (!options.web_root.empty() &&
      !std::filesystem::is_directory(options.web_root, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--web_root: ", options.web_root.string(),
                     " is not a directory (the page's files)"));
  }
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->gateway_ = gateway;
  server->metrics_ = metrics;
  server->auth_ = auth;
  ASSIGN_OR_RETURN(server->server_, MakeServer(options));
  server->max_streams_ = std::max(1, options.max_streams);
  server->stream_ping_ = options.stream_ping;
  // One request a connection: an idle kept-alive connection would hold one
  // of the request threads for its whole timeout.
  server->server_->set_keep_alive_max_count(1);
  // A thread a connection, up to every stream plus kRequestThreads: streams
  // beyond their cap are refused before they hold a thread for long.
  server->server_->new_task_queue = [n = server->max_streams_ +
                                         kRequestThreads] {
    return new httplib::ThreadPool(n);
  };
  // Requests are small JSON documents: a larger body is refused (413)
  // before it is read into memory.
  server->server_->set_payload_max_length(kMaxBodyBytes);
  // The library's default adds SO_REUSEPORT, which would let another
  // process bind the same port and take a share of the requests: only
  // SO_REUSEADDR (a restart need not wait out TIME_WAIT).
  server->server_->set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server->Route(options);
  ASSIGN_OR_RETURN(server->address_, Bind(*server->server_, options.listen));
  server->thread_ =
      std::thread([s = server->server_.get()] { s->listen_after_bind(); });
  // stop() is a no-op until the loop runs: wait for it, so that a Stop()
  // right after Start() cannot leave the thread listening forever.
  while (!server->server_->is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return server;
}

void HttpServer::Route(const HttpServerOptions& options) {
  server_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  server_->Get("/metrics",
               [this](const httplib::Request& req, httplib::Response& res) {
                 ServeMetrics(req, res);
               });
  const auto api = [this](const httplib::Request& req, httplib::Response& res) {
    const std::string method = req.matches[1];
    const std::string authorization = req.get_header_value("Authorization");
    if (method == "WatchSweep") return StreamWatch(req, res);
    Send(gateway_->Call(method, ParamsOf(req), req.body, authorization), res);
  };
  const std::string pattern = absl::StrCat(kApiPrefix, "([A-Za-z]+)");
  server_->Get(pattern, api);
  // The body is read here, a piece at a time: a body over kMaxBodyBytes is
  // refused (413) once it passes the limit, chunked or not, never held whole.
  server_->Post(pattern, [api](const httplib::Request& req,
                               httplib::Response& res,
                               const httplib::ContentReader& content) {
    httplib::Request with_body = req;
    uint64_t declared = 0;
    (void)absl::SimpleAtoi(req.get_header_value("Content-Length"), &declared);
    // A declared length over the limit: the library skips the body unread.
    bool too_large = declared > kMaxBodyBytes;
    const bool read = content([&](const char* data, size_t length) {
      too_large = with_body.body.size() + length > kMaxBodyBytes;
      if (!too_large) with_body.body.append(data, length);
      return !too_large;
    });
    if (too_large || !read) {
      res.status = too_large ? 413 : 400;
      res.set_content(too_large ? absl::StrCat("request body over ",
                                               kMaxBodyBytes, " bytes\n")
                                : "the request body could not be read\n",
                      "text/plain");
      return;
    }
    api(with_body, res);
  });
  if (!options.web_root.empty()) {
    server_->Get(".*", [root = options.web_root](const httplib::Request& req,
                                                 httplib::Response& res) {
      ServeStatic(root, req.path, res);
    });
  }
}

void HttpServer::ServeMetrics(const httplib::Request& req,
                              httplib::Response& res) {
  const absl::Status allowed = auth_->CheckToken(
      BearerToken(req.get_header_value("Authorization")), Role::kRead);
  if (!allowed.ok()) {
    return Send(ErrorReply(static_cast<grpc::StatusCode>(allowed.code()),
                           allowed.message()),
                res);
  }
  absl::StatusOr<std::string> text = metrics_->Scrape();
  if (!text.ok()) {
    return Send(
        ErrorReply(grpc::StatusCode::UNAVAILABLE, text.status().message()),
        res);
  }
  res.set_content(*text, "text/plain; version=0.0.4; charset=utf-8");
}

// WatchSweep as Server-Sent Events: one "data: SweepEvent-JSON" per event.
// A refusal (bad id, token) is an ordinary error reply before the stream
// starts; one that happens later ends the stream with an "error" event.
void HttpServer::StreamWatch(const httplib::Request& req,
                             httplib::Response& res) const {
  const std::string authorization = req.get_header_value("Authorization");
  const HttpReply check =
      gateway_->Call("GetSweep", ParamsOf(req), req.body, authorization);
  if (check.status != 200) return Send(check, res);
  if (open_streams_->fetch_add(1) >= max_streams_) {
    open_streams_->fetch_sub(1);
    return Send(ErrorReply(grpc::StatusCode::UNAVAILABLE,
                           absl::StrCat("too many open event streams (",
                                        max_streams_, "); try again later")),
                res);
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [gateway = gateway_, params = ParamsOf(req), body = req.body,
       authorization, stopping = stopping_,
       ping = stream_ping_](size_t, httplib::DataSink& sink) {
        const auto emit = [&](const std::string& text) {
          return !*stopping && sink.is_writable() &&
                 sink.write(text.data(), text.size());
        };
        const HttpReply end = gateway->Watch(
            params, body, authorization,
            [&](const std::string& json) {
              return emit(absl::StrCat("data: ", json, "\n\n"));
            },
            [&] { return emit(": keep-alive\n\n"); }, ping);
        if (end.status != 200) {
          emit(absl::StrCat("event: error\ndata: ", end.body, "\n\n"));
        }
        sink.done();
        return true;
      },
      [open = open_streams_](bool) { open->fetch_sub(1); });
}

void HttpServer::Stop() {
  if (server_ == nullptr || stopping_->exchange(true)) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

HttpServer::~HttpServer() { Stop(); }

}  // namespace moetune::coordinator::http
