// moetune-coordinator --listen ADDR --db PATH: the gRPC coordinator, the
// database's only writer. Stops cleanly on SIGTERM / SIGINT.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/log.h"
#include "coordinator/server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051", "host:port to serve on");
ABSL_FLAG(std::string, db, "moetune.db", "SQLite database file");
ABSL_FLAG(int, lease_ms, 10000,
          "a worker's lease lapses this long after its last heartbeat (ms)");
ABSL_FLAG(int, heartbeat_ms, 1000, "heartbeat interval asked of workers (ms)");

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }
}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("moetune-coordinator --listen ADDR --db PATH");
  absl::ParseCommandLine(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  moetune::coordinator::ServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.db_path = absl::GetFlag(FLAGS_db);
  options.scheduler.lease_ms = absl::GetFlag(FLAGS_lease_ms);
  options.scheduler.heartbeat_interval_ms = absl::GetFlag(FLAGS_heartbeat_ms);
  auto server = moetune::coordinator::CoordinatorServer::Start(
      options, moetune::RealClock::Get());
  if (!server.ok()) {
    std::cerr << "moetune-coordinator: " << server.status().message() << "\n";
    return 1;
  }
  std::cout << "listening on " << (*server)->address() << std::endl;
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  moetune::LogInfo("shutting down");
  (*server)->Shutdown();
  return 0;
}
