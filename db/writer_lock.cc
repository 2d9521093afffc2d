#include "db/writer_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace moetune::db {
namespace {

// The owner recorded at `path`: its first line is the holder's pid, the
// rest says who it is. "" when the file names another pid than `pid` (a
// stale file of a crashed holder) or none.
std::string RecordedOwner(const std::string& path, int pid) {
  std::ifstream in(path);
  std::string pid_line;
  int recorded = 0;
  if (!std::getline(in, pid_line) || !absl::SimpleAtoi(pid_line, &recorded)) {
    return "";
  }
  if (pid > 0 && recorded != pid) return "";
  std::stringstream rest;
  rest << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(rest.str()));
}

// The pid holding an exclusive flock on the file of `fd` (from /proc/locks),
// or 0 when none is listed.
int FlockHolderPid(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return 0;
  // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; the device in hex.
  const std::string id = absl::StrCat(
      absl::Hex(major(st.st_dev), absl::kZeroPad2), ":",
      absl::Hex(minor(st.st_dev), absl::kZeroPad2), ":", st.st_ino);
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    const std::vector<std::string> f =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    int pid = 0;
    if (f.size() >= 6 && f[1] == "FLOCK" && f[3] == "WRITE" && f[5] == id &&
        absl::SimpleAtoi(f[4], &pid)) {
      return pid;
    }
  }
  return 0;
}

std::string DescribeHolder(int fd, const std::string& owner_path) {
  const int pid = FlockHolderPid(fd);
  const std::string owner = RecordedOwner(owner_path, pid);
  if (!owner.empty()) return owner;
  return pid > 0 ? absl::StrCat("pid ", pid, " on this host")
                 : "another process";
}

absl::Status WriteOwner(const std::string& path, const std::string& owner) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << getpid() << "\n" << owner << "\n";
    if (!out.flush()) {
      return absl::InternalError(
          absl::StrCat("db: writing ", tmp, ": ", std::strerror(errno)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("db: writing ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::Status OpenRefused(const std::string& db_path, int error) {
  if (error == EROFS || error == EACCES || error == EPERM) {
    return absl::FailedPreconditionError(absl::StrCat(
        "db: cannot open '", db_path, "' for writing: ", std::strerror(error),
        "; the coordinator is the database's writer; tools can still read "
        "it"));
  }
  return absl::InternalError(
      absl::StrCat("db: opening ", db_path, ": ", std::strerror(error)));
}

}  // namespace

std::string DescribeThisProcess(const std::string& what) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(
      "pid ", getpid(), " on host ", host, what.empty() ? "" : ", ", what,
      ", since ",
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()));
}

absl::StatusOr<WriterLock> WriterLock::Acquire(const std::string& db_path,
                                               const std::string& owner) {
  const int fd = open(db_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return OpenRefused(db_path, errno);
  const std::string owner_path = db_path + ".lock";
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string holder = DescribeHolder(fd, owner_path);
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "db: '", db_path, "' already has a writer: ", holder,
        " (one coordinator per database file, whatever the path to it; "
        "talk to it with --coordinator)"));
  }
  WriterLock lock(fd, owner_path);
  if (absl::Status status = WriteOwner(owner_path, owner); !status.ok()) {
    return status;
  }
  return lock;
}

absl::Status WriterLock::SetOwner(const std::string& owner) {
  return WriteOwner(owner_path_, owner);
}

void WriterLock::Release() {
  if (fd_ < 0) return;
  std::remove(owner_path_.c_str());  // before the lock: no one else's
  close(fd_);                        // releases the flock
  fd_ = -1;
}

WriterLock::WriterLock(WriterLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      owner_path_(std::move(other.owner_path_)) {}

WriterLock& WriterLock::operator=(WriterLock&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = std::exchange(other.fd_, -1);
    owner_path_ = std::move(other.owner_path_);
  }
  return *this;
}

WriterLock::~WriterLock() { Release(); }

}  // namespace moetune::db
