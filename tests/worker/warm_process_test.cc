#include "worker/warm_process.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune::worker {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

// The fake serving child (warm_child_fake.cc), built beside this test.
WarmProcess Fake() { return WarmProcess({MOETUNE_WARM_CHILD_FAKE}); }

std::string PidOf(const ChildOutcome& out) {
  return out.stdout_data.substr(0, out.stdout_data.find(':'));
}

ChildOutcome Ask(WarmProcess& p, const std::string& request,
                 milliseconds deadline = milliseconds(10000),
                 const std::atomic<bool>* cancel = nullptr) {
  return p.Call(request, deadline, cancel);
}

TEST(WarmProcessTest, OneProcessServesCallAfterCall) {
  WarmProcess p = Fake();
  const ChildOutcome first = Ask(p, "a");
  ASSERT_EQ(first.kind, ChildOutcome::Kind::kExited) << first.error;
  EXPECT_EQ(first.exit_code, 0);
  const ChildOutcome second = Ask(p, std::string(1 << 20, 'b'));  // > a pipe
  EXPECT_EQ(PidOf(second), PidOf(first));
  EXPECT_EQ(second.stdout_data.size(), PidOf(first).size() + 1 + (1 << 20));
  EXPECT_TRUE(p.running());
  EXPECT_EQ(p.calls_served(), 2);
}

TEST(WarmProcessTest, ACrashCostsOneCallAndTheNextStartsAFreshProcess) {
  WarmProcess p = Fake();
  const std::string pid = PidOf(Ask(p, "a"));
  const ChildOutcome crash = Ask(p, "crash");
  EXPECT_EQ(crash.kind, ChildOutcome::Kind::kSignaled);
  EXPECT_EQ(crash.signal, SIGABRT);
  EXPECT_FALSE(p.running());
  const ChildOutcome next = Ask(p, "b");
  ASSERT_EQ(next.kind, ChildOutcome::Kind::kExited);
  EXPECT_NE(PidOf(next), pid);
  EXPECT_EQ(p.calls_served(), 1);
}

TEST(WarmProcessTest, AHangIsKilledAtItsDeadline) {
  WarmProcess p = Fake();
  Ask(p, "a");
  const auto start = std::chrono::steady_clock::now();
  const ChildOutcome hang = Ask(p, "hang", milliseconds(300));
  EXPECT_EQ(hang.kind, ChildOutcome::Kind::kTimedOut);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE(p.running());
  EXPECT_EQ(Ask(p, "c").kind, ChildOutcome::Kind::kExited);
}

TEST(WarmProcessTest, CancelKillsTheCall) {
  WarmProcess p = Fake();
  std::atomic<bool> cancel{false};
  std::thread canceller([&cancel] {
    std::this_thread::sleep_for(milliseconds(200));
    cancel = true;
  });
  const ChildOutcome out = Ask(p, "hang", milliseconds(20000), &cancel);
  canceller.join();
  EXPECT_EQ(out.kind, ChildOutcome::Kind::kCancelled);
  EXPECT_FALSE(p.running());
}

TEST(WarmProcessTest, AnExitWithoutAReplyIsNotAReply) {
  WarmProcess p = Fake();
  const ChildOutcome out = Ask(p, "quit");
  EXPECT_EQ(out.kind, ChildOutcome::Kind::kExited);
  EXPECT_NE(out.exit_code, 0);
  EXPECT_TRUE(out.stdout_data.empty());
  EXPECT_FALSE(p.running());
}

TEST(WarmProcessTest, StderrIsTheCallsOwnAndStopEndsTheProcess) {
  WarmProcess p = Fake();
  const ChildOutcome noisy = Ask(p, "noisy");
  EXPECT_THAT(noisy.stdout_data, HasSubstr(":noisy"));
  EXPECT_EQ(noisy.stderr_tail, "something went wrong\n");
  EXPECT_TRUE(Ask(p, "quiet").stderr_tail.empty());
  p.Stop();
  EXPECT_FALSE(p.running());
  EXPECT_EQ(Ask(p, "again").kind, ChildOutcome::Kind::kExited);
}

// A process that ends between calls (killed, out of memory) costs no call.
TEST(WarmProcessTest, AProcessThatDiedIdleIsReplacedBeforeTheNextCall) {
  WarmProcess p = Fake();
  const ChildOutcome bye = Ask(p, "bye");
  ASSERT_EQ(bye.kind, ChildOutcome::Kind::kExited);
  std::this_thread::sleep_for(milliseconds(200));  // it exits meanwhile
  const ChildOutcome next = Ask(p, "next");
  ASSERT_EQ(next.kind, ChildOutcome::Kind::kExited) << DescribeOutcome(next);
  EXPECT_EQ(next.exit_code, 0);
  EXPECT_NE(PidOf(next), PidOf(bye));
  EXPECT_EQ(p.calls_served(), 1);
}

TEST(WarmProcessTest, AMissingProgramIsASpawnFailure) {
  WarmProcess p({"/nonexistent/moetune-worker"});
  const ChildOutcome out = Ask(p, "a");
  EXPECT_EQ(out.kind, ChildOutcome::Kind::kSpawnFailed);
  EXPECT_THAT(out.error, HasSubstr("/nonexistent/moetune-worker"));
}

}  // namespace
}  // namespace moetune::worker
