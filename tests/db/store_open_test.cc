// Opening the database: every refusal is one line that names the path and
// the cause, comes before anything is written, and leaves the file byte for
// byte as it was; the database has one writer.
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>

#include "db/sqlite.h"
#include "db/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/db/store_test_util.h"

namespace moetune::db {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

class StoreOpenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::path(::testing::TempDir()) /
        ("moetune_open_" +
         std::string(
             ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "m.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A database with one sweep, closed again.
  void MakeDatabase() {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status();
    std::vector<v1::Trial> trials = {MakeTrial("cpu_reference", "h1")};
    ASSERT_TRUE((*store)->CreateSweep(MakeSpec("kept"), &trials, kT0).ok());
  }
  // The status of a refused open, checked to be one line naming the path.
  absl::Status Refused(const OpenOptions& options = {}) {
    auto store = Store::Open(path_, options);
    EXPECT_FALSE(store.ok());
    if (store.ok()) return absl::OkStatus();
    const std::string message(store.status().message());
    EXPECT_THAT(message, HasSubstr(path_));
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return store.status();
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(StoreOpenTest, AMissingDirectoryIsNamed) {
  path_ = (dir_ / "no" / "such" / "m.db").string();
  const absl::Status status = Refused();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("does not exist"));
  EXPECT_FALSE(fs::exists(dir_ / "no"));
}

TEST_F(StoreOpenTest, AReaderNeedsTheFileAndCreatesNothing) {
  OpenOptions reader;
  reader.writer = false;
  EXPECT_THAT(std::string(Refused(reader).message()),
              HasSubstr("no such file"));
  EXPECT_FALSE(fs::exists(path_));
}

TEST_F(StoreOpenTest, AFileThatIsNotADatabaseIsLeftAsItIs) {
  const std::string junk(4096, 'x');
  std::ofstream(path_, std::ios::binary) << junk;
  const absl::Status status = Refused();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("not a moetune database"));
  EXPECT_EQ(ReadBytes(path_), junk);
  EXPECT_FALSE(fs::exists(path_ + "-wal"));
}

TEST_F(StoreOpenTest, ANewerSchemaIsRefusedNamingBothVersions) {
  MakeDatabase();
  const int newer = Store::LatestSchemaVersion() + 1;
  {
    auto conn = Connection::Open(path_);
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE(
        conn->Exec("PRAGMA user_version = " + std::to_string(newer)).ok());
  }
  const std::string before = ReadBytes(path_);
  const absl::Status status = Refused();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("schema is version " + std::to_string(newer)));
  EXPECT_THAT(
      std::string(status.message()),
      HasSubstr("knows up to " + std::to_string(Store::LatestSchemaVersion())));
  EXPECT_EQ(ReadBytes(path_), before);
}

TEST_F(StoreOpenTest, ASecondWriterIsRefusedNamingTheFirst) {
  OpenOptions first;
  first.owner = "coordinator A on port 50051";
  auto holder = Store::Open(path_, first);
  ASSERT_TRUE(holder.ok()) << holder.status();
  const absl::Status status = Refused();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("coordinator A on port 50051"));
  ASSERT_TRUE((*holder)->SetOwner("coordinator A, renamed").ok());
  EXPECT_THAT(std::string(Refused().message()),
              HasSubstr("coordinator A, renamed"));
  // A reader takes no lock and is welcome beside the writer.
  OpenOptions reader;
  reader.writer = false;
  auto read = Store::Open(path_, reader);
  ASSERT_TRUE(read.ok()) << read.status();
  holder->reset();  // the lock goes with its holder
  EXPECT_TRUE(Store::Open(path_).ok());
}

TEST_F(StoreOpenTest, AReaderSeesTheWritersRecordsAndWritesNothing) {
  auto writer = Store::Open(path_);
  ASSERT_TRUE(writer.ok());
  std::vector<v1::Trial> trials = {MakeTrial("cpu_reference", "h1")};
  ASSERT_TRUE((*writer)->CreateSweep(MakeSpec("s"), &trials, kT0).ok());
  OpenOptions options;
  options.writer = false;
  auto reader = Store::Open(path_, options);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->ListSweeps(0)->size(), 1u);
  std::vector<v1::Trial> more = {MakeTrial("cpu_reference", "h2")};
  EXPECT_FALSE((*reader)->CreateSweep(MakeSpec("t"), &more, kT0).ok());
  EXPECT_EQ((*writer)->ListSweeps(0)->size(), 1u);
}

// A read-only mount: refused for writing at open (not at the first write);
// readable by tools. Needs CAP_SYS_ADMIN for a private tmpfs.
TEST_F(StoreOpenTest, AReadOnlyFileSystemIsRefusedForWritingAtOpen) {
  const fs::path mount_point = dir_ / "ro";
  fs::create_directories(mount_point);
  if (mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=4m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN)";
  }
  path_ = (mount_point / "m.db").string();
  MakeDatabase();
  ASSERT_EQ(mount(nullptr, mount_point.c_str(), nullptr, MS_REMOUNT | MS_RDONLY,
                  nullptr),
            0);
  const std::string before = ReadBytes(path_);
  const absl::Status status = Refused();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("for writing: Read-only file system"));
  OpenOptions reader;
  reader.writer = false;
  auto read = Store::Open(path_, reader);
  EXPECT_TRUE(read.ok()) << read.status();
  if (read.ok()) EXPECT_EQ((*read)->ListSweeps(0)->size(), 1u);
  read = absl::UnknownError("closed");
  EXPECT_EQ(ReadBytes(path_), before);
  umount2(mount_point.c_str(), MNT_DETACH);
}

// The lock follows the file, not its name: a symlink or a hard link to a
// held database is refused naming the holder, and the refused opens leave
// no lock file behind, nor does the holder once it is gone.
TEST_F(StoreOpenTest, ALinkToAHeldDatabaseIsRefusedNamingTheHolder) {
  OpenOptions first;
  first.owner = DescribeThisProcess("coordinator A");
  auto holder = Store::Open(path_, first);
  ASSERT_TRUE(holder.ok()) << holder.status();
  const fs::path symlink = dir_ / "symlink.db", hardlink = dir_ / "hard.db";
  fs::create_symlink(path_, symlink);
  fs::create_hard_link(path_, hardlink);
  for (const fs::path& link : {symlink, hardlink}) {
    auto second = Store::Open(link.string());
    ASSERT_FALSE(second.ok()) << link;
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(
        std::string(second.status().message()),
        HasSubstr("already has a writer: pid " + std::to_string(getpid())));
    EXPECT_FALSE(fs::exists(link.string() + ".lock")) << link;
  }
  EXPECT_TRUE(fs::exists(path_ + ".lock"));
  holder->reset();
  EXPECT_FALSE(fs::exists(path_ + ".lock"));
  EXPECT_TRUE(Store::Open(hardlink.string()).ok());
}

// A refusal after the lock is taken (here: a schema newer than the build)
// releases it and leaves no lock file.
TEST_F(StoreOpenTest, ARefusedStartLeavesNoLockFile) {
  MakeDatabase();
  {
    Connection conn = *Connection::Open(path_);
    ASSERT_TRUE(conn.Exec("PRAGMA user_version = 999").ok());
  }
  EXPECT_THAT(std::string(Refused().message()),
              HasSubstr("schema is version 999"));
  EXPECT_FALSE(fs::exists(path_ + ".lock"));
}

// Another application's SQLite file is refused as it is, naming its tables,
// not migrated beside them.
TEST_F(StoreOpenTest, AForeignDatabaseIsRefusedNamingItsTables) {
  {
    Connection conn = *Connection::Open(path_);
    ASSERT_TRUE(conn.Exec("CREATE TABLE foo (x)").ok());
  }
  const std::string before = ReadBytes(path_);
  const absl::Status status = Refused();
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("not a moetune database (schema version 0, tables: "
                        "foo)"));
  EXPECT_EQ(ReadBytes(path_), before);
  {
    Connection conn = *Connection::Open(path_);
    ASSERT_TRUE(conn.Exec("PRAGMA user_version = 3").ok());
  }
  EXPECT_THAT(std::string(Refused().message()),
              HasSubstr("schema version 3, tables: foo"));
}

// A database another connection holds for a moment (as while a crashed
// writer's WAL is recovered) is waited for at open, not refused.
TEST_F(StoreOpenTest, ABusyDatabaseIsWaitedForAtOpen) {
  MakeDatabase();
  std::optional<Connection> other = *Connection::Open(path_);
  ASSERT_TRUE(other->Exec("PRAGMA locking_mode = EXCLUSIVE").ok());
  ASSERT_TRUE(other->Exec("BEGIN EXCLUSIVE").ok());
  ASSERT_TRUE(other->Exec("COMMIT").ok());  // the exclusive lock stays
  std::thread release([&other] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    other.reset();  // closing releases it
  });
  auto store = Store::Open(path_);
  release.join();
  EXPECT_TRUE(store.ok()) << store.status();
}

}  // namespace
}  // namespace moetune::db
