// `moetune sweep`: submit, watch to the end, print the results and the
// winner. Ctrl-C (SIGINT) or SIGTERM cancels the sweep on the coordinator
// and stops the embedded workers before the CLI exits (130), so nothing is
// left running or RUNNING behind it.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include "coordinator/cli/commands.h"
#include "coordinator/cli/session.h"
#include "coordinator/cli/spec_file.h"
#include "coordinator/cli/views.h"

namespace moetune::cli {
namespace {

std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted = true; }

// Streams progress to stderr until the sweep ends, or until interrupted
// (then the stream is cancelled and ABORTED comes back).
absl::Status WatchToEnd(Session& session, int64_t sweep_id) {
  grpc::ClientContext context;
  std::atomic<bool> done{false};
  std::thread interrupter([&] {
    while (!done && !g_interrupted) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (g_interrupted) context.TryCancel();
  });
  v1::WatchSweepRequest request;
  request.set_sweep_id(sweep_id);
  auto reader = session.stub->WatchSweep(&context, request);
  v1::SweepEvent event;
  while (reader->Read(&event)) {
    if (event.has_trial()) std::cerr << ProgressLine(event) << std::endl;
  }
  const grpc::Status status = reader->Finish();
  done = true;
  interrupter.join();
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

// The results table and the winner of a finished sweep.
int Report(Session& session, int64_t sweep_id, const CommandOptions& options) {
  v1::TrialFilter filter;
  filter.set_sweep_id(sweep_id);
  filter.set_include_samples(options.samples);
  absl::StatusOr<v1::QueryTrialsResponse> trials = Trials(session, filter);
  if (!trials.ok()) return Fail(trials.status());
  PrintTrials(*trials, options.format);
  v1::GetBestRequest best_request;
  best_request.set_sweep_id(sweep_id);
  absl::StatusOr<v1::GetBestResponse> best = Best(session, best_request);
  if (best.ok() && options.format == OutputFormat::kTable) {
    std::cout << "\n";
    PrintBest(std::cout, *best);
  }
  if (!AnyDone(*trials)) {
    std::cerr << "moetune: no trial succeeded\n";
    return 1;
  }
  return 0;
}

}  // namespace

int CmdSweep(const CommandOptions& options) {
  if (options.spec_path.empty()) {
    return Fail(absl::InvalidArgumentError("--spec: required for sweep"));
  }
  absl::StatusOr<v1::SweepSpec> spec = LoadSweepSpec(options.spec_path);
  if (!spec.ok()) return Fail(spec.status());
  signal(SIGINT, OnInterrupt);
  signal(SIGTERM, OnInterrupt);
  absl::StatusOr<Session> session = Open(options, Access::kWriteWithWorkers);
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<v1::SubmitSweepResponse> submitted = Submit(*session, *spec);
  if (!submitted.ok()) return Fail(submitted.status());
  std::cerr << "sweep " << submitted->sweep_id() << ": "
            << submitted->trial_count() << " trials" << std::endl;
  const absl::Status watched = WatchToEnd(*session, submitted->sweep_id());
  if (g_interrupted) return Interrupted(*session, submitted->sweep_id());
  if (!watched.ok()) return Fail(watched);
  return Report(*session, submitted->sweep_id(), options);
}

}  // namespace moetune::cli
