// `moetune sweep`: submit, watch to the end (progress on stderr), print the
// results and the winners. Ctrl-C (SIGINT) or SIGTERM cancels the sweep on
// the coordinator and stops the embedded workers before the CLI exits (130),
// so nothing is left running or RUNNING behind it.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "coordinator/cli/best_view.h"
#include "coordinator/cli/commands.h"
#include "coordinator/cli/progress_display.h"
#include "coordinator/cli/session.h"
#include "coordinator/cli/spec_file.h"
#include "coordinator/cli/views.h"

namespace moetune::cli {
namespace {

std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted = true; }

// Streams progress to stderr until the sweep ends, or until interrupted
// (then the stream is cancelled and ABORTED comes back). A second thread
// notices the interrupt and keeps a terminal's elapsed time moving.
absl::Status WatchToEnd(Session& session, int64_t sweep_id) {
  grpc::ClientContext context;
  std::atomic<bool> done{false};
  ProgressDisplay display(&std::cerr, isatty(STDERR_FILENO) == 1,
                          RealClock::Get());
  std::thread interrupter([&] {
    for (int tick = 1; !done && !g_interrupted; ++tick) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (tick % 20 == 0) display.Tick();
    }
    if (g_interrupted) context.TryCancel();
  });
  v1::WatchSweepRequest request;
  request.set_sweep_id(sweep_id);
  auto reader = session.stub->WatchSweep(&context, request);
  v1::SweepEvent event;
  while (reader->Read(&event)) display.OnEvent(event);
  const grpc::Status status = reader->Finish();
  done = true;
  interrupter.join();
  display.Finish();
  if (g_interrupted) return absl::AbortedError("interrupted");
  return FromGrpc(status);
}

// After an interrupt: the sweep is cancelled (queued trials at once, the
// running ones at their next heartbeat).
int Interrupted(Session& session, int64_t sweep_id) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  v1::CancelSweepRequest request;
  request.set_sweep_id(sweep_id);
  v1::Sweep sweep;
  const grpc::Status status =
      session.stub->CancelSweep(&context, request, &sweep);
  std::cerr << "moetune: interrupted; sweep " << sweep_id
            << (status.ok() ? " cancelled" : " could not be cancelled: ")
            << (status.ok() ? "" : status.error_message()) << std::endl;
  return 130;
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
    PrintTrials(std::cout, *trials, options.format);
    if (options.format == OutputFormat::kTable) {
      std::cout << "\n";
      PrintBest(std::cout, best);
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
  const absl::Status watched = WatchToEnd(session, submitted->sweep_id());
  if (g_interrupted) return Interrupted(session, submitted->sweep_id());
  if (!watched.ok()) return Fail(watched);
  return Report(session, submitted->sweep_id(), options);
}

// --comm_calibration is for the embedded workers: a remote coordinator's
// workers take their own (a sweep would otherwise run without it, silently).
// A file that cannot be read is refused here: an embedded worker refuses it
// at start, and the sweep would wait for a worker that never comes. Its
// contents are the worker's to check (the CLI does not link the worker's
// library), so a malformed file still costs that wait; the log says why.
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
  signal(SIGINT, OnInterrupt);
  signal(SIGTERM, OnInterrupt);
  absl::StatusOr<Session> session = Open(options, Access::kWriteWithWorkers);
  if (!session.ok()) return Fail(session.status());
  AnnounceWorkerLogs(*session);
  const int code = SubmitAndWatch(*session, *spec, options);
  if (session->cluster != nullptr) {
    const bool keep = code != 0 || options.keep_worker_logs;
    session->cluster->set_keep_logs(keep);
    if (keep && !session->cluster->worker_logs().empty()) {
      std::cerr << "moetune: worker logs kept (see above)" << std::endl;
    }
  }
  return code;
}

}  // namespace moetune::cli
