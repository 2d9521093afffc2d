// ProcfsProcessStats against a fake /proc tree (exact arithmetic) and against
// the real one (plausible values for this test process).
#include "coordinator/http/process_stats.h"

#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace moetune::coordinator::http {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

class FakeProcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("fake_proc_" + std::to_string(getpid()));
    fs::remove_all(root_);
    // A command name with a space and a ')' must not shift the fields.
    std::string stat = "42 (my (od) d) S";
    for (int field = 4; field <= 21; ++field) stat += " 0";
    stat += " 500 0 0\n";  // field 22: start time in ticks after boot
    Write(root_ / "self/stat", stat);
    Write(root_ / "stat", "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n");
    Write(root_ / "self/statm", "1000 25 10 1 0 50 0\n");
    for (const char* fd : {"0", "1", "2", "7"})
      Write(root_ / "self/fd" / fd, "");
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(FakeProcTest, ReadsStartTimeResidentMemoryAndDescriptors) {
  const absl::StatusOr<ProcessStats> stats =
      ProcfsProcessStats(root_.string()).Read();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_DOUBLE_EQ(stats->start_time_seconds,
                   1700000000.0 + 500.0 / sysconf(_SC_CLK_TCK));
  EXPECT_DOUBLE_EQ(stats->resident_memory_bytes, 25.0 * sysconf(_SC_PAGESIZE));
  EXPECT_EQ(stats->open_fds, 4);
}

TEST_F(FakeProcTest, AMissingFileIsAnError) {
  fs::remove(root_ / "self/statm");
  EXPECT_FALSE(ProcfsProcessStats(root_.string()).Read().ok());
}

TEST_F(FakeProcTest, NoBootTimeIsAnError) {
  Write(root_ / "stat", "cpu  1 2 3\n");
  EXPECT_FALSE(ProcfsProcessStats(root_.string()).Read().ok());
}

TEST(ProcfsProcessStatsTest, ThisProcessLooksPlausible) {
  const absl::StatusOr<ProcessStats> stats = ProcfsProcessStats().Read();
  ASSERT_TRUE(stats.ok()) << stats.status();
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_GT(stats->start_time_seconds, 1e9);  // after 2001
  EXPECT_LE(stats->start_time_seconds, now + 1);
  EXPECT_GT(stats->resident_memory_bytes, 1 << 20);
  EXPECT_GE(stats->open_fds, 3);  // stdin, stdout, stderr
}

}  // namespace
}  // namespace moetune::coordinator::http
