// moetune-coordinator --listen ADDR --worker_listen ADDR --db PATH: the gRPC
// coordinator, the database's only writer. Stops cleanly within about a
// second on SIGTERM / SIGINT, whatever the load.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/log.h"
#include "common/log_flags.h"
#include "coordinator/server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "host:port of the public API (CLI, dashboards)");
ABSL_FLAG(std::string, worker_listen, "127.0.0.1:50052",
          "host:port of the WorkerControl service (workers)");
ABSL_FLAG(std::string, db, "moetune.db", "SQLite database file");
ABSL_FLAG(int, lease_ms, 10000,
          "a worker's lease lapses this long after its last heartbeat (ms)");
ABSL_FLAG(int, heartbeat_ms, 1000, "heartbeat interval asked of workers (ms)");
ABSL_FLAG(std::string, tokens_file, "",
          "bearer tokens, lines \"ROLE TOKEN\" (read, write, worker); empty: "
          "every call allowed");
ABSL_FLAG(std::string, tls_cert, "", "server certificate chain (PEM): TLS");
ABSL_FLAG(std::string, tls_key, "", "server private key (PEM)");
ABSL_FLAG(std::string, tls_client_ca, "",
          "CA (PEM) that must sign workers' client certificates (mutual TLS)");
ABSL_FLAG(std::string, http_listen, "",
          "host:port of the HTTP listener for dashboards (the API as JSON, "
          "/metrics, the page), e.g. 127.0.0.1:50080; empty: no HTTP");
ABSL_FLAG(std::string, web_root, "",
          "directory of the dashboard page's files; empty: web/ beside this "
          "binary");
ABSL_FLAG(bool, http_allow_writes, false,
          "allow SubmitSweep and CancelSweep over HTTP (still needing the "
          "write role when tokens are on); off: the HTTP API is read-only");

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

// `name` in this binary's directory (where CMake and deploy/bundle.sh put
// the page), or "" when the binary's path cannot be read.
std::filesystem::path BesideBinary(const char* name) {
  std::error_code error;
  const std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::filesystem::path() : self.parent_path() / name;
}

// web/ beside the binary when it is there; else no page (the API and
// metrics are served all the same), said once in the log.
std::filesystem::path DefaultWebRoot() {
  const std::filesystem::path beside = BesideBinary("web");
  std::error_code error;
  if (!beside.empty() && std::filesystem::is_directory(beside, error)) {
    return beside;
  }
  if (!absl::GetFlag(FLAGS_http_listen).empty()) {
    moetune::LogWarning(
        "no web/ beside this binary: HTTP serves the API and "
        "metrics without the page (see --web_root)");
  }
  return {};
}

moetune::coordinator::ServerOptions OptionsFromFlags() {
  moetune::coordinator::ServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.worker_listen = absl::GetFlag(FLAGS_worker_listen);
  options.db_path = absl::GetFlag(FLAGS_db);
  options.scheduler.lease_ms = absl::GetFlag(FLAGS_lease_ms);
  options.scheduler.heartbeat_interval_ms = absl::GetFlag(FLAGS_heartbeat_ms);
  options.tokens_file = absl::GetFlag(FLAGS_tokens_file);
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  options.http.listen = absl::GetFlag(FLAGS_http_listen);
  options.http.web_root = absl::GetFlag(FLAGS_web_root);
  if (options.http.web_root.empty()) options.http.web_root = DefaultWebRoot();
  options.http.allow_writes = absl::GetFlag(FLAGS_http_allow_writes);
  return options;
}

std::string Usage() {
  return absl::StrCat(
      "moetune-coordinator: the gRPC coordinator, the database's only "
      "writer.\n\nusage: moetune-coordinator [--listen ADDR] "
      "[--worker_listen ADDR] [--db PATH] [flags]\n\nflags:\n",
      moetune::DescribeFlags(
          {"listen", "worker_listen", "db", "lease_ms", "heartbeat_ms",
           "tokens_file", "tls_cert", "tls_key", "tls_client_ca", "http_listen",
           "web_root", "http_allow_writes", "log_level", "log_format"}),
      "  --help, --version\n\nexit: 0 stopped by SIGTERM/SIGINT, 1 refused "
      "start, 2 bad flag\n");
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "moetune-coordinator --listen ADDR --worker_listen ADDR --db PATH");
  const int handled =
      moetune::HandleCommandLine(argc, argv, "moetune-coordinator", Usage());
  if (handled >= 0) return handled;
  absl::ParseCommandLine(argc, argv);
  if (const absl::Status logging =
          moetune::ApplyLogFlags(moetune::LogLevel::kInfo);
      !logging.ok()) {
    std::cerr << "moetune-coordinator: " << logging.message() << "\n";
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  // Installed before anything slow, so that a signal during start-up is
  // honoured as soon as the server is up.
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  auto server = moetune::coordinator::CoordinatorServer::Start(
      OptionsFromFlags(), moetune::RealClock::Get());
  if (!server.ok()) {
    std::cerr << "moetune-coordinator: " << server.status().message() << "\n";
    return absl::IsInvalidArgument(server.status()) ? 2 : 1;
  }
  std::cout << "listening on " << (*server)->address() << " (workers on "
            << (*server)->worker_address() << ")" << std::endl;
  if (!(*server)->http_address().empty()) {
    std::cout << "http on " << (*server)->http_address() << std::endl;
  }
  // The version in the log, once started (a refused start is one line).
  moetune::LogInfo(moetune::VersionLine("moetune-coordinator"), " serving ",
                   OptionsFromFlags().db_path);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  moetune::LogInfo("shutting down");
  (*server)->Shutdown();
  return 0;
}
