#include "worker/warm_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <thread>

#include "worker/frames.h"

namespace moetune::worker {
namespace {

constexpr size_t kStderrTailBytes = 4096;
constexpr auto kStopGrace = std::chrono::seconds(2);

// Drains what fd holds now, without waiting for more.
void DrainReady(int fd, std::string* sink) {
  pollfd pfd{fd, POLLIN, 0};
  while (poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN)) {
    if (!DrainInto(fd, sink, kStderrTailBytes)) return;
  }
}

}  // namespace

bool WarmProcess::Start(std::string* error) {
  pending_.clear();
  served_ = 0;
  pid_ = SpawnChild(argv_, &pipes_, error);
  return pid_ > 0;
}

bool WarmProcess::Ended() const {
  siginfo_t info{};
  return waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid_;
}

int WarmProcess::Forget(ChildOutcome* out) {
  // Its group first, before the reap frees the group id: anything it left
  // behind dies too, and a descendant holding stderr open cannot keep the
  // drain below waiting.
  kill(-pid_, SIGKILL);
  if (out != nullptr && pipes_.stderr_fd >= 0) {
    while (DrainInto(pipes_.stderr_fd, &out->stderr_tail, kStderrTailBytes)) {
    }
  }
  pipes_.CloseAll();
  const int status = ReapChild(pid_);
  pid_ = -1;
  pending_.clear();
  return status;
}

void WarmProcess::ReapIfGone() {
  if (pid_ > 0 && Ended()) Forget(nullptr);
}

ChildOutcome WarmProcess::Call(const std::string& request,
                               std::chrono::milliseconds deadline,
                               const std::atomic<bool>* cancel) {
  ChildOutcome out;
  ReapIfGone();  // one that died idle costs no call: a fresh one starts
  if (!running() && !Start(&out.error)) return out;  // kSpawnFailed
  out.kind = Exchange(EncodeFrame(request), deadline, cancel, &out);
  if (out.kind == ChildOutcome::Kind::kExited && out.exit_code == 0 &&
      running()) {
    ++served_;
    return out;
  }
  End(&out);
  return out;
}

// Writes the frame and reads until a whole reply frame, the child's end of
// output, the deadline or cancel. A reply leaves kind kExited, exit 0.
ChildOutcome::Kind WarmProcess::Exchange(const std::string& frame,
                                         std::chrono::milliseconds deadline,
                                         const std::atomic<bool>* cancel,
                                         ChildOutcome* out) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  size_t written = 0;
  while (true) {
    if (cancel != nullptr && cancel->load())
      return ChildOutcome::Kind::kCancelled;
    if (std::chrono::steady_clock::now() > end)
      return ChildOutcome::Kind::kTimedOut;
    const bool writing = written < frame.size();
    pollfd fds[3] = {{pipes_.stdout_fd, POLLIN, 0},
                     {pipes_.stderr_fd, POLLIN, 0},
                     {pipes_.stdin_fd, POLLOUT, 0}};
    if (poll(fds, writing ? 3 : 2, 50) < 0 && errno != EINTR) break;
    if (fds[1].revents & (POLLIN | POLLHUP)) {
      DrainInto(pipes_.stderr_fd, &out->stderr_tail, kStderrTailBytes);
    }
    if (writing && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = write(pipes_.stdin_fd, frame.data() + written,
                              frame.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) break;  // it died
    }
    if (fds[0].revents & (POLLIN | POLLHUP)) {
      if (!DrainInto(pipes_.stdout_fd, &pending_, 0)) break;  // end of output
      bool corrupt = false;
      std::optional<std::string> reply = TakeFrame(&pending_, &corrupt);
      if (corrupt) {
        out->frame_error = "a frame length over the limit of " +
                           std::to_string(kMaxFrameBytes) + " bytes";
        break;
      }
      if (reply.has_value()) {
        DrainReady(pipes_.stderr_fd, &out->stderr_tail);  // written before
        out->kind = ChildOutcome::Kind::kExited;
        out->exit_code = 0;
        out->stdout_data = std::move(*reply);
        return out->kind;
      }
    }
  }
  // The child closed its output (or wrote garbage): End reaps and says how
  // it ended.
  out->kind = ChildOutcome::Kind::kExited;
  out->exit_code = -1;
  return out->kind;
}

void WarmProcess::End(ChildOutcome* out) {
  if (pid_ <= 0) return;
  const int status = Forget(out);
  if (out->kind == ChildOutcome::Kind::kExited) {
    SetExitStatus(status, out);
    // A child that ended its output but exited 0 still gave no reply.
    if (out->kind == ChildOutcome::Kind::kExited && out->exit_code == 0) {
      out->exit_code = -1;
    }
  }
}

void WarmProcess::Stop() {
  if (pid_ <= 0) return;
  close(pipes_.stdin_fd);  // end of input: a serving child returns
  pipes_.stdin_fd = -1;
  const auto until = std::chrono::steady_clock::now() + kStopGrace;
  while (!Ended() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Forget(nullptr);
}

}  // namespace moetune::worker
