// moetune-load-bench: the coordinator under load. For each worker count it
// starts a real moetune-coordinator on a fresh database, submits one grid
// sweep of --trials trials, and lets that many fake CPU workers take and
// report trials (made-up results, at once: the coordinator is what is
// measured) while --watchers clients poll the public API. Prints, per
// worker count: trials recorded per second, RPC latencies (p50 / p99),
// the coordinator's memory and how long SIGTERM took. A benchmark, not a
// test: figures depend on the machine and its disk (every result is a
// synchronous SQLite commit).
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/stats.h"
#include "coordinator/load_bench/coordinator_process.h"
#include "coordinator/load_bench/load_clients.h"
#include "grpcpp/grpcpp.h"
#include "proto/moetune.grpc.pb.h"

ABSL_FLAG(std::string, workers, "4,16,64", "fake worker counts, one run each");
ABSL_FLAG(int, trials, 10000, "trials in the sweep (a multiple of 100)");
ABSL_FLAG(int, watchers, 4, "clients polling GetSweep + QueryTrials");
ABSL_FLAG(int, poll_ms, 200, "each watcher's wait between polls (ms)");
ABSL_FLAG(std::string, coordinator_binary, "",
          "moetune-coordinator (default: the one beside this binary)");
ABSL_FLAG(std::string, dir, "", "where the databases go (default: $TMPDIR)");

namespace moetune::load {
namespace {

using Clock = std::chrono::steady_clock;

// tiny, cpu_reference: 100 batch sizes x trials/100 context lengths.
v1::SweepSpec LoadSpec(int trials) {
  v1::SweepSpec spec;
  spec.set_name("load-bench");
  v1::WorkloadSpace* w = spec.mutable_workload();
  w->set_model_preset("tiny");
  w->set_region(v1::MOE_LAYER);
  for (int b = 1; b <= 100; ++b) w->add_batch_sizes(b);
  for (int c = 1; c <= trials / 100; ++c) w->add_context_lengths(16 * c);
  spec.mutable_space()->add_moe_backends("cpu_reference");
  return spec;
}

struct RunFigures {
  int workers = 0;
  double submit_s = 0, wall_s = 0, sigterm_s = 0;
  int64_t reported = 0, errors = 0;
  std::vector<double> acquire, report, poll;  // ms, sorted
  double rss_mib = 0, peak_rss_mib = 0;
};

// Blocks on WatchSweep until the sweep leaves RUNNING (or 30 minutes).
void WaitForSweep(const std::string& address, int64_t sweep_id) {
  auto stub = v1::Moetune::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::minutes(30));
  v1::WatchSweepRequest request;
  request.set_sweep_id(sweep_id);
  auto reader = stub->WatchSweep(&context, request);
  v1::SweepEvent event;
  while (reader->Read(&event)) {
  }
  (void)reader->Finish();
}

absl::StatusOr<int64_t> Submit(const std::string& address, int trials) {
  auto stub = v1::Moetune::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::SubmitSweepRequest request;
  *request.mutable_spec() = LoadSpec(trials);
  v1::SubmitSweepResponse response;
  const grpc::Status status = stub->SubmitSweep(&context, request, &response);
  if (!status.ok()) return absl::InternalError(status.error_message());
  return response.sweep_id();
}

// Runs the clients against `coordinator` until the sweep is finished.
void Drive(CoordinatorProcess& coordinator, int64_t sweep_id, RunFigures* f) {
  LoadState state;
  LatencyLog acquire, report, poll;
  std::vector<std::thread> clients;
  for (int i = 0; i < f->workers; ++i) {
    clients.emplace_back(RunFakeWorker, coordinator.worker_address(), i, 1000,
                         &state, &acquire, &report);
  }
  for (int i = 0; i < absl::GetFlag(FLAGS_watchers); ++i) {
    clients.emplace_back(RunWatcher, coordinator.address(), sweep_id,
                         absl::GetFlag(FLAGS_poll_ms), &state, &poll);
  }
  const auto start = Clock::now();
  WaitForSweep(coordinator.address(), sweep_id);
  f->wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  f->rss_mib = coordinator.RssMib();
  f->peak_rss_mib = coordinator.PeakRssMib();
  state.stop = true;
  for (std::thread& t : clients) t.join();
  f->reported = state.reported;
  f->errors = state.errors;
  f->acquire = acquire.Sorted();
  f->report = report.Sorted();
  f->poll = poll.Sorted();
}

absl::StatusOr<RunFigures> RunOnce(int workers, const std::string& binary,
                                   const std::string& dir) {
  RunFigures f;
  f.workers = workers;
  const std::string db = absl::StrCat(dir, "/load-", getpid(), "-", workers);
  std::filesystem::remove(db);
  auto coordinator = CoordinatorProcess::Start(binary, db + ".db", db + ".log");
  if (!coordinator.ok()) return coordinator.status();
  const auto submit = Clock::now();
  absl::StatusOr<int64_t> sweep_id =
      Submit((*coordinator)->address(), absl::GetFlag(FLAGS_trials));
  if (!sweep_id.ok()) return sweep_id.status();
  f.submit_s = std::chrono::duration<double>(Clock::now() - submit).count();
  Drive(**coordinator, *sweep_id, &f);
  f.sigterm_s = (*coordinator)->Terminate();
  for (const char* suffix : {".db", ".db-wal", ".db-shm", ".db.lock"}) {
    std::filesystem::remove(db + suffix);
  }
  return f;
}

std::string P(const std::vector<double>& sorted, double q) {
  return sorted.empty() ? "-"
                        : absl::StrFormat("%.2f", stats::Percentile(sorted, q));
}

void PrintHeader() {
  std::cout << absl::StrFormat(
      "%-7s %-8s %-7s %-8s %-8s %-9s %-15s %-15s %-15s %-8s %-8s %-9s %s\n",
      "workers", "watchers", "trials", "submit_s", "wall_s", "trials/s",
      "acquire_p50/99", "report_p50/99", "poll_p50/99", "rss_mib", "peak_mib",
      "sigterm_s", "errors");
}

void PrintRow(const RunFigures& f) {
  std::cout << absl::StrFormat(
      "%-7d %-8d %-7d %-8.2f %-8.1f %-9.0f %-15s %-15s %-15s %-8.0f %-8.0f "
      "%-9.2f %d\n",
      f.workers, absl::GetFlag(FLAGS_watchers), f.reported, f.submit_s,
      f.wall_s, f.reported / f.wall_s,
      P(f.acquire, 0.5) + "/" + P(f.acquire, 0.99),
      P(f.report, 0.5) + "/" + P(f.report, 0.99),
      P(f.poll, 0.5) + "/" + P(f.poll, 0.99), f.rss_mib, f.peak_rss_mib,
      f.sigterm_s, f.errors);
}

std::string DefaultBinary() {
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  return std::filesystem::path(std::string(self, n > 0 ? n : 0))
             .parent_path()
             .string() +
         "/moetune-coordinator";
}

}  // namespace
}  // namespace moetune::load

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "moetune-load-bench [--workers 4,16,64] [--trials 10000]");
  absl::ParseCommandLine(argc, argv);
  using namespace moetune::load;
  std::string binary = absl::GetFlag(FLAGS_coordinator_binary);
  if (binary.empty()) binary = DefaultBinary();
  std::string dir = absl::GetFlag(FLAGS_dir);
  const char* tmp = std::getenv("TMPDIR");
  if (dir.empty()) dir = tmp != nullptr ? tmp : "/tmp";
  if (absl::GetFlag(FLAGS_trials) % 100 != 0) {
    std::cerr << "--trials: must be a multiple of 100\n";
    return 2;
  }
  PrintHeader();
  for (absl::string_view count :
       absl::StrSplit(absl::GetFlag(FLAGS_workers), ',')) {
    int workers = 0;
    if (!absl::SimpleAtoi(count, &workers) || workers < 1) {
      std::cerr << "--workers: '" << count << "' is not a worker count\n";
      return 2;
    }
    absl::StatusOr<RunFigures> figures = RunOnce(workers, binary, dir);
    if (!figures.ok()) {
      std::cerr << "load bench: " << figures.status().message() << "\n";
      return 1;
    }
    PrintRow(*figures);
  }
  return 0;
}
