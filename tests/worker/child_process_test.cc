#include "worker/child_process.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune::worker {
namespace {

using std::chrono::milliseconds;

ChildOutcome Sh(const std::string& script, const std::string& input = "",
                milliseconds deadline = milliseconds(10000),
                const std::atomic<bool>* cancel = nullptr) {
  return RunChildProcess({"/bin/sh", "-c", script}, input, deadline, cancel);
}

TEST(ChildProcessTest, PassesStdinAndCapturesStdout) {
  const ChildOutcome out = Sh("cat; echo done", "hello\n");
  EXPECT_EQ(out.kind, ChildOutcome::Kind::kExited);
  EXPECT_EQ(out.exit_code, 0);
  EXPECT_EQ(out.stdout_data, "hello\ndone\n");
}

TEST(ChildProcessTest, LargeStdinAndStdoutDoNotDeadlock) {
  const std::string big(1 << 20, 'x');  // beyond any pipe buffer
  const ChildOutcome out = Sh("cat", big);
  EXPECT_EQ(out.kind, ChildOutcome::Kind::kExited);
  EXPECT_EQ(out.stdout_data.size(), big.size());
}

TEST(ChildProcessTest, ReportsExitCodeAndStderrTail) {
  const ChildOutcome out = Sh("echo boom >&2; exit 7");
  EXPECT_EQ(out.kind, ChildOutcome::Kind::kExited);
  EXPECT_EQ(out.exit_code, 7);
  EXPECT_EQ(out.stderr_tail, "boom\n");
  EXPECT_EQ(DescribeOutcome(out), "trial process exited with status 7");
}

TEST(ChildProcessTest, ACrashIsASignalNotAWorkerCrash) {
  const ChildOutcome out = Sh("kill -SEGV $$");
  EXPECT_EQ(out.kind, ChildOutcome::Kind::kSignaled);
  EXPECT_EQ(out.signal, SIGSEGV);
  EXPECT_THAT(DescribeOutcome(out), ::testing::HasSubstr("signal 11"));
}

TEST(ChildProcessTest, AHangIsKilledAtTheDeadlineWithItsChildren) {
  const auto start = std::chrono::steady_clock::now();
  // The grandchild holds stdout open: only killing the group ends the wait.
  const ChildOutcome out = Sh("sleep 30 & sleep 30", "", milliseconds(300));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(out.kind, ChildOutcome::Kind::kTimedOut);
  EXPECT_LT(elapsed, std::chrono::seconds(5));
}

TEST(ChildProcessTest, CancelStopsARunningChild) {
  std::atomic<bool> cancel{false};
  std::thread canceller([&cancel] {
    std::this_thread::sleep_for(milliseconds(200));
    cancel = true;
  });
  const ChildOutcome out = Sh("sleep 30", "", milliseconds(20000), &cancel);
  canceller.join();
  EXPECT_EQ(out.kind, ChildOutcome::Kind::kCancelled);
}

TEST(ChildProcessTest, AMissingBinaryIsASpawnFailure) {
  const ChildOutcome out = RunChildProcess({"/nonexistent/moetune-worker"}, "",
                                           milliseconds(1000), nullptr);
  EXPECT_EQ(out.kind, ChildOutcome::Kind::kSpawnFailed);
  EXPECT_THAT(DescribeOutcome(out), ::testing::HasSubstr("could not start"));
}

}  // namespace
}  // namespace moetune::worker
