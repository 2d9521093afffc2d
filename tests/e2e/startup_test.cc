// Start-up against a bad database, a taken database or a taken port, with
// the real binaries: a one-line error naming the path or flag and the
// cause, a non-zero exit (never a signal), the file untouched.
#include <sys/mount.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace moetune::e2e {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The three ways in: the coordinator, an embedded sweep, a query.
std::vector<std::string> CommandsOn(const std::string& db) {
  return {
      "timeout 30 " + kBin + "/moetune-coordinator --listen=127.0.0.1:0 " +
          "--worker_listen=127.0.0.1:0 --db=" + db,
      "timeout 60 " + kBin + "/moetune sweep --gpus 0 --spec " + kSource +
          "/deploy/example_sweep.json --db " + db,
      "timeout 30 " + kBin + "/moetune sweeps --db " + db,
  };
}

// The lines of `output` that are not warnings (a spec's dropped tiles are
// warned about before the database is opened).
int64_t LinesBesidesWarnings(const std::string& output) {
  int64_t lines = 0;
  for (const absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!line.empty() && !absl::StrContains(line, ": warning: ")) ++lines;
  }
  return lines;
}

// Each command is refused with one line naming `db` and `cause` (besides
// warnings), and the file's bytes are what they were.
void ExpectRefused(const fs::path& db, const std::string& cause) {
  const std::string before = fs::exists(db) ? ReadBytes(db) : "";
  for (const std::string& command : CommandsOn(db.string())) {
    const CommandResult result = RunCommand(command);
    EXPECT_TRUE(result.exit_code == 1 || result.exit_code == 2)
        << command << " exited " << result.exit_code << "\n"
        << result.output;
    EXPECT_EQ(LinesBesidesWarnings(result.output), 1) << command << "\n"
                                                      << result.output;
    EXPECT_THAT(result.output, HasSubstr("'" + db.string() + "'")) << command;
    EXPECT_THAT(result.output, HasSubstr(cause)) << command;
    if (!before.empty()) EXPECT_EQ(ReadBytes(db), before) << command;
  }
}

// A database made by a coordinator that then stopped cleanly.
void MakeDatabase(const fs::path& dir) {
  Cluster cluster(dir);
  cluster.Submit(TwelveTrialSpec());
  cluster.coordinator().Signal(SIGTERM);
  EXPECT_EQ(cluster.coordinator().Wait(), 0);
}

TEST(StartupTest, AMissingDirectoryIsNamed) {
  const fs::path dir = TempDir("no-dir");
  ExpectRefused(dir / "absent" / "m.db", "does not exist");
  EXPECT_FALSE(fs::exists(dir / "absent"));
}

TEST(StartupTest, ACorruptFileIsNamedAndLeftAsItIs) {
  const fs::path dir = TempDir("corrupt");
  std::ofstream(dir / "m.db", std::ios::binary) << std::string(8192, '\x5a');
  ExpectRefused(dir / "m.db", "not a moetune database");
}

TEST(StartupTest, ANewerSchemaIsNamedAndLeftAsItIs) {
  const fs::path dir = TempDir("newer");
  MakeDatabase(dir);
  // SQLite keeps user_version (the schema version) big-endian at byte 60.
  {
    std::fstream file(dir / "e2e.db",
                      std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(60);
    file.write("\0\0\0\x63", 4);  // version 99
  }
  ExpectRefused(dir / "e2e.db", "schema is version 99");
}

TEST(StartupTest, AReadOnlyMountIsRefusedForWritingButReadable) {
  const fs::path dir = TempDir("read-only");
  const fs::path mount_point = dir / "ro";
  fs::create_directories(mount_point);
  if (mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=8m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN)";
  }
  MakeDatabase(mount_point);
  ASSERT_EQ(mount(nullptr, mount_point.c_str(), nullptr, MS_REMOUNT | MS_RDONLY,
                  nullptr),
            0);
  const fs::path db = mount_point / "e2e.db";
  const std::string before = ReadBytes(db);
  for (const std::string& command :
       {CommandsOn(db.string())[0], CommandsOn(db.string())[1]}) {
    const CommandResult result = RunCommand(command);
    EXPECT_EQ(result.exit_code, 1) << command << "\n" << result.output;
    EXPECT_THAT(result.output, HasSubstr("for writing: Read-only file system"));
  }
  // Queries read it where it is.
  const CommandResult sweeps = RunCommand(CommandsOn(db.string())[2]);
  EXPECT_EQ(sweeps.exit_code, 0) << sweeps.output;
  EXPECT_THAT(sweeps.output, HasSubstr("RUNNING"));
  EXPECT_EQ(ReadBytes(db), before);
  umount2(mount_point.c_str(), MNT_DETACH);
}

// Flags are checked before the database is touched: a bad one names itself
// and leaves no database behind.
TEST(StartupTest, BadTlsFlagsAreNamedBeforeTheDatabaseIsOpened) {
  const fs::path dir = TempDir("tls-flags");
  const std::string base = "timeout 30 " + kBin +
                           "/moetune-coordinator --listen=127.0.0.1:0 "
                           "--worker_listen=127.0.0.1:0 --db=" +
                           (dir / "m.db").string();
  const CommandResult missing =
      RunCommand(base + " --tls_cert=" + (dir / "none.pem").string() +
                 " --tls_key=" + (dir / "none.key").string());
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("--tls_cert: cannot read"));
  const CommandResult half =
      RunCommand(base + " --tls_cert=" + (dir / "none.pem").string());
  EXPECT_EQ(half.exit_code, 2) << half.output;
  EXPECT_THAT(half.output, HasSubstr("give both"));
  EXPECT_FALSE(fs::exists(dir / "m.db"));
  EXPECT_FALSE(fs::exists(dir / "m.db.lock"));
}

TEST(StartupTest, ASecondCoordinatorOnTheDatabaseIsRefusedNamingTheFirst) {
  const fs::path dir = TempDir("two-writers");
  Cluster first(dir);
  const CommandResult second =
      RunCommand("timeout 30 " + kBin +
                 "/moetune-coordinator --listen=127.0.0.1:0 "
                 "--worker_listen=127.0.0.1:0 --db=" +
                 first.db_path());
  EXPECT_EQ(second.exit_code, 1) << second.output;
  EXPECT_THAT(second.output, HasSubstr("listening on " + first.address()));
  EXPECT_THAT(second.output, HasSubstr("pid "));
  // An embedded sweep is refused alike; queries read beside the writer.
  const CommandResult sweep = RunCommand(CommandsOn(first.db_path())[1]);
  EXPECT_EQ(sweep.exit_code, 1) << sweep.output;
  EXPECT_THAT(sweep.output, HasSubstr("listening on " + first.address()));
  // (Nothing is recorded yet: the listing is its header, exit 1.)
  const CommandResult sweeps = RunCommand(CommandsOn(first.db_path())[2]);
  EXPECT_EQ(sweeps.exit_code, 1) << sweeps.output;
  EXPECT_THAT(sweeps.output, HasSubstr("sweep  name  state"));
  EXPECT_THAT(sweeps.output, HasSubstr("no sweeps found"));
  EXPECT_TRUE(first.coordinator().Alive());
}

TEST(StartupTest, ATakenPortIsRefusedAndAnOutOfRangeOneNamed) {
  const fs::path dir = TempDir("ports");
  Cluster first(dir);
  const std::string base = "timeout 30 " + kBin + "/moetune-coordinator --db=" +
                           (dir / "other.db").string();
  const CommandResult taken = RunCommand(base + " --listen=" + first.address() +
                                         " --worker_listen=127.0.0.1:0");
  EXPECT_EQ(taken.exit_code, 1) << taken.output;
  EXPECT_THAT(taken.output,
              HasSubstr("--listen: cannot listen on " + first.address()));
  const CommandResult worker_taken = RunCommand(
      base + " --listen=127.0.0.1:0 --worker_listen=" + first.worker_address());
  EXPECT_EQ(worker_taken.exit_code, 1) << worker_taken.output;
  EXPECT_THAT(worker_taken.output, HasSubstr("--worker_listen"));
  const CommandResult wrapped = RunCommand(
      base + " --listen=127.0.0.1:70000 --worker_listen=127.0.0.1:0");
  EXPECT_EQ(wrapped.exit_code, 2) << wrapped.output;
  EXPECT_THAT(wrapped.output, HasSubstr("port in 0..65535"));
  EXPECT_TRUE(first.coordinator().Alive());
}

}  // namespace
}  // namespace moetune::e2e
