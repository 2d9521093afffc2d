// Clock: the one way code reads time, so that leases, heartbeats and timing
// logic are tested with a FakeClock. RealClock is thread-safe; FakeClock is
// thread-safe (atomics) and only moves when a test advances it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace moetune {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall time: ms since the Unix epoch (for records and leases).
  virtual int64_t NowUnixMs() const = 0;
  // Monotonic time in ns (for measuring durations).
  virtual int64_t MonotonicNs() const = 0;
};

class RealClock final : public Clock {
 public:
  int64_t NowUnixMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  int64_t MonotonicNs() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  static RealClock* Get() {
    static RealClock* clock = new RealClock();
    return clock;
  }
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_unix_ms = 1'700'000'000'000)
      : now_ns_(start_unix_ms * 1'000'000) {}
  int64_t NowUnixMs() const override { return now_ns_.load() / 1'000'000; }
  int64_t MonotonicNs() const override { return now_ns_.load(); }
  void AdvanceMs(int64_t ms) { now_ns_ += ms * 1'000'000; }
  void AdvanceNs(int64_t ns) { now_ns_ += ns; }

 private:
  std::atomic<int64_t> now_ns_;
};

// Adds the monotonic seconds between its construction and its destruction to
// *total: one phase's share of a run (a trial's checks, its timed work).
class AddElapsedSeconds {
 public:
  AddElapsedSeconds(const Clock& clock, double* total)
      : clock_(clock), total_(total), start_ns_(clock.MonotonicNs()) {}
  ~AddElapsedSeconds() {
    *total_ += static_cast<double>(clock_.MonotonicNs() - start_ns_) * 1e-9;
  }
  AddElapsedSeconds(const AddElapsedSeconds&) = delete;
  AddElapsedSeconds& operator=(const AddElapsedSeconds&) = delete;

 private:
  const Clock& clock_;
  double* total_;
  int64_t start_ns_;
};

}  // namespace moetune
