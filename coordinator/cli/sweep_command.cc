// `moetune sweep`: submit, watch to the end (progress on stderr), print the
// results and the winners. Ctrl-C (SIGINT) or SIGTERM cancels the sweep on
// the coordinator and stops the embedded workers before the CLI exits (130),
// so nothing is left running or RUNNING behind it. When every embedded
// worker has exited before the sweep ends, nothing would ever run its
// trials: the sweep is cancelled the same way and the CLI exits 1 with the
// end of the workers' logs, rather than wait for a worker forever.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/cli/best_view.h"
#include "coordinator/cli/commands.h"
#include "coordinator/cli/progress_display.h"
#include "coordinator/cli/session.h"
#include "coordinator/cli/spec_file.h"
#include "coordinator/cli/time_account.h"
#include "coordinator/cli/views.h"
#include "tuner/sweep_plan.h"

namespace moetune::cli {
namespace {

// Lines of each worker's log shown when they have all exited.
constexpr int kLogTailLines = 5;

std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted = true; }

// How watching a sweep ended.
enum class WatchEnd {
  kEnded,        // the sweep ended (FINISHED, or cancelled elsewhere)
  kInterrupted,  // Ctrl-C or SIGTERM
  kWorkersGone,  // every embedded worker exited: none is left to run it
  kFailed,       // the stream failed
};

struct Watched {
  WatchEnd end = WatchEnd::kEnded;
  absl::Status status;  // why, for kWorkersGone and kFailed
};

// The embedded workers (none for a remote coordinator): each one that has
// exited is said once; not OK when none is left.
absl::Status CheckWorkers(Session& session, ProgressDisplay& display) {
  if (session.cluster == nullptr) return absl::OkStatus();
  std::vector<std::string> exited;
  const absl::Status status = session.cluster->CheckWorkers(&exited);
  if (status.ok()) {
    for (const std::string& line : exited) display.Note("moetune: " + line);
  }
  return status;
}

// Beside the stream, every 50 ms until `done`: an interrupt, or the last
// embedded worker's exit, cancels the stream (the coordinator would keep
// the sweep waiting for a worker forever); each second a terminal's elapsed
// time moves. Returns the workers' status (not OK: it cancelled for them).
absl::Status Supervise(Session& session, ProgressDisplay& display,
                       const std::atomic<bool>& done,
                       grpc::ClientContext& context) {
  for (int tick = 1; !done && !g_interrupted; ++tick) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (tick % 20 == 0) display.Tick();
    const absl::Status workers = CheckWorkers(session, display);
    if (!workers.ok()) {
      context.TryCancel();
      return workers;
    }
  }
  if (g_interrupted) context.TryCancel();
  return absl::OkStatus();
}

// Streams progress to stderr until the sweep ends, or until Supervise
// cancels the stream.
Watched WatchToEnd(Session& session, int64_t sweep_id) {
  grpc::ClientContext context;
  std::atomic<bool> done{false};
  ProgressDisplay display(&std::cerr, isatty(STDERR_FILENO) == 1,
                          RealClock::Get());
  absl::Status workers;
  std::thread supervisor(
      [&] { workers = Supervise(session, display, done, context); });
  v1::WatchSweepRequest request;
  request.set_sweep_id(sweep_id);
  auto reader = session.stub->WatchSweep(&context, request);
  v1::SweepEvent event;
  while (reader->Read(&event)) display.OnEvent(event);
  const grpc::Status status = reader->Finish();
  done = true;
  supervisor.join();
  display.Finish();
  if (g_interrupted) return {WatchEnd::kInterrupted, absl::OkStatus()};
  // A sweep that ended as its last worker exited is reported as it ended.
  if (status.ok()) return {WatchEnd::kEnded, absl::OkStatus()};
  if (!workers.ok()) return {WatchEnd::kWorkersGone, workers};
  return {WatchEnd::kFailed, FromGrpc(status)};
}

// A remote coordinator that went away (a restart) resumes its sweeps: the
// watch is taken up again, once a second, for up to kReconnectS, with a note
// when the coordinator is lost. The embedded one is this
// process's own, so its loss is final.
constexpr int kReconnectS = 120;

Watched FollowToEnd(Session& session, int64_t sweep_id) {
  Watched watched = WatchToEnd(session, sweep_id);
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(kReconnectS);
  bool lost = false;
  while (session.cluster == nullptr && watched.end == WatchEnd::kFailed &&
         absl::IsUnavailable(watched.status) && !g_interrupted &&
         std::chrono::steady_clock::now() < give_up) {
    if (!lost) {
      std::cerr << "moetune: lost the coordinator (" << watched.status.message()
                << "); following sweep " << sweep_id << " again when it is back"
                << std::endl;
      lost = true;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
    watched = WatchToEnd(session, sweep_id);
  }
  return watched;
}

// Cancels the sweep as `moetune cancel` does: queued trials at once, the
// running ones at their next heartbeat; what it recorded stays. A running
// trial whose embedded worker is gone, or stopped first, ends CANCELLED
// when the cluster stops (LocalCluster::ReleaseLeases).
grpc::Status CancelSweep(Session& session, int64_t sweep_id) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  v1::CancelSweepRequest request;
  request.set_sweep_id(sweep_id);
  v1::Sweep sweep;
  return session.stub->CancelSweep(&context, request, &sweep);
}

int Interrupted(Session& session, int64_t sweep_id) {
  const grpc::Status status = CancelSweep(session, sweep_id);
  std::cerr << "moetune: interrupted; sweep " << sweep_id
            << (status.ok() ? " cancelled" : " could not be cancelled: ")
            << (status.ok() ? "" : status.error_message()) << std::endl;
  return 130;
}

// Every embedded worker exited before the sweep ended (e.g. each refused
// its --comm_calibration at start): the sweep is cancelled as an interrupt
// cancels it, and the end of each worker's log says why here, whatever
// becomes of the logs. Exit 1: the sweep did not succeed.
int WorkersGone(Session& session, int64_t sweep_id, const absl::Status& why,
                const CommandOptions& options) {
  const grpc::Status cancelled = CancelSweep(session, sweep_id);
  std::cerr << "moetune: " << why.message() << "\n";
  for (const std::string& log : session.cluster->worker_logs()) {
    std::cerr << "moetune: the end of " << log << ":\n";
    for (const std::string& line : LastLines(log, kLogTailLines)) {
      std::cerr << "  " << line << "\n";
    }
  }
  if (cancelled.ok()) {
    std::cerr << "moetune: sweep " << sweep_id
              << " cancelled; what it recorded stays: moetune results --sweep "
              << sweep_id << " --db " << options.db_path << std::endl;
  } else {
    std::cerr << "moetune: sweep " << sweep_id
              << " could not be cancelled: " << cancelled.error_message()
              << std::endl;
  }
  return 1;
}

bool AnyDone(const v1::QueryTrialsResponse& trials) {
  for (const v1::Trial& trial : trials.trials()) {
    if (trial.state() == v1::DONE) return true;
  }
  return false;
}

// --format json: the sweep, its trials and its winners in one document.
void PrintSweepJson(const v1::Sweep& sweep,
                    const v1::QueryTrialsResponse& trials,
                    const v1::GetBestResponse& best) {
  std::cout << "{\n\"sweep\": " << ToJson(sweep)
            << ",\n\"results\": " << ToJson(trials)
            << ",\n\"best\": " << ToJson(best) << "\n}\n";
}

// Where the sweep's time went (time_account.h), after its winners; nothing
// when the sweep cannot be read back or its trials recorded no phases.
void PrintTimeAccount(Session& session, int64_t sweep_id,
                      const v1::QueryTrialsResponse& trials) {
  absl::StatusOr<v1::Sweep> sweep = GetSweep(session, sweep_id);
  if (!sweep.ok()) return;
  const std::string line = TimeAccountLine(*sweep, trials);
  if (!line.empty()) std::cout << line << "\n";
}

// The results and the winners of a finished sweep: CSV has the trials only
// (one header, one kind of row), JSON and the table both.
int Report(Session& session, int64_t sweep_id, const CommandOptions& options) {
  v1::TrialFilter filter;
  filter.set_sweep_id(sweep_id);
  filter.set_include_samples(options.samples);
  absl::StatusOr<v1::QueryTrialsResponse> trials = Trials(session, filter);
  if (!trials.ok()) return Fail(trials.status());
  v1::GetBestRequest best_request;
  best_request.set_sweep_id(sweep_id);
  // No winner (nothing succeeded) is an empty answer here, not an error.
  const v1::GetBestResponse best =
      Best(session, best_request).value_or(v1::GetBestResponse());
  if (options.format == OutputFormat::kJson) {
    absl::StatusOr<v1::Sweep> sweep = GetSweep(session, sweep_id);
    if (!sweep.ok()) return Fail(sweep.status());
    PrintSweepJson(*sweep, *trials, best);
  } else {
    PrintTrials(std::cout, *trials, options.format, options.wide);
    if (options.format == OutputFormat::kTable) {
      std::cout << "\n";
      PrintBest(std::cout, best);
      PrintTimeAccount(session, sweep_id, *trials);
    }
  }
  if (!AnyDone(*trials)) {
    std::cerr << "moetune: no trial succeeded\n";
    return 1;
  }
  return 0;
}

// Where the embedded workers write (printed so that a failure can be read
// there); removed after a clean sweep unless --keep_worker_logs.
void AnnounceWorkerLogs(const Session& session) {
  if (session.cluster == nullptr) return;
  for (const std::string& log : session.cluster->worker_logs()) {
    std::cerr << "moetune: worker log " << log << std::endl;
  }
}

int SubmitAndWatch(Session& session, const v1::SweepSpec& spec,
                   const CommandOptions& options) {
  absl::StatusOr<v1::SubmitSweepResponse> submitted = Submit(session, spec);
  if (!submitted.ok()) return Fail(submitted.status());
  std::cerr << "moetune: sweep " << submitted->sweep_id() << ": "
            << submitted->trial_count() << " trials" << std::endl;
  const int64_t sweep_id = submitted->sweep_id();
  const Watched watched = FollowToEnd(session, sweep_id);
  switch (watched.end) {
    case WatchEnd::kInterrupted:
      return Interrupted(session, sweep_id);
    case WatchEnd::kWorkersGone:
      return WorkersGone(session, sweep_id, watched.status, options);
    case WatchEnd::kFailed:
      return Fail(watched.status);
    case WatchEnd::kEnded:
      break;
  }
  return Report(session, sweep_id, options);
}

// --comm_calibration is for the embedded workers: a remote coordinator's
// workers take their own (a sweep would otherwise run without it, silently).
// A file that cannot be read is refused here, before anything starts. Its
// contents are the worker's to check (the CLI does not link the worker's
// library): every worker refusing them exits at its start, and the sweep
// stops with the end of their logs (WorkersGone).
absl::Status CheckCommCalibration(const CommandOptions& options) {
  const std::string& path = options.comm_calibration;
  if (path.empty()) return absl::OkStatus();
  if (!options.coordinator.empty()) {
    return absl::InvalidArgumentError(
        "--comm_calibration: only for the embedded workers; with "
        "--coordinator, give it to each moetune-worker instead");
  }
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error) || !std::ifstream(path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--comm_calibration: cannot read ", path));
  }
  return absl::OkStatus();
}

}  // namespace

int CmdSweep(const CommandOptions& options) {
  if (options.spec_path.empty()) {
    return Fail(absl::InvalidArgumentError("--spec: required for sweep"));
  }
  if (const absl::Status calibration = CheckCommCalibration(options);
      !calibration.ok()) {
    return Fail(calibration);
  }
  absl::StatusOr<v1::SweepSpec> spec = LoadSweepSpec(options.spec_path);
  if (!spec.ok()) return Fail(spec.status());
  // Embedded, the spec is checked as the coordinator will check it before
  // anything starts: a rejected spec creates no database and no worker logs.
  if (options.coordinator.empty()) {
    if (absl::StatusOr<std::shared_ptr<const tuner::SweepPlan>> plan =
            tuner::SweepPlan::Create(*spec);
        !plan.ok()) {
      return Fail(plan.status());
    }
  }
  for (const std::string& warning : DroppedTileWarnings(*spec)) {
    std::cerr << "moetune: warning: " << warning << "\n";
  }
  signal(SIGINT, OnInterrupt);
  signal(SIGTERM, OnInterrupt);
  absl::StatusOr<Session> session = Open(options, Access::kWriteWithWorkers);
  if (!session.ok()) return Fail(session.status());
  AnnounceWorkerLogs(*session);
  const int code = SubmitAndWatch(*session, *spec, options);
  if (session->cluster != nullptr) {
    // A worker that exited early explains it in its log, even when the
    // others carried the sweep to success.
    const bool keep = code != 0 || options.keep_worker_logs ||
                      session->cluster->any_worker_exited();
    session->cluster->set_keep_logs(keep);
    if (keep && !session->cluster->worker_logs().empty()) {
      std::cerr << "moetune: worker logs kept (see above)" << std::endl;
    }
  }
  return code;
}

}  // namespace moetune::cli
