#include "db/writer_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace moetune::db {
namespace {

std::string ReadOwner(int fd) {
  char buffer[512] = {};
  const ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
  if (n <= 0) return "an unknown process";
  return std::string(absl::StripAsciiWhitespace(std::string(buffer, n)));
}

absl::Status WriteOwner(int fd, const std::string& owner) {
  const std::string line = owner + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, line.data(), line.size(), 0) !=
                                   static_cast<ssize_t>(line.size())) {
    return absl::InternalError(
        absl::StrCat("db: writing the lock file: ", std::strerror(errno)));
  }
  return absl::OkStatus();
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
  const std::string path = db_path + ".lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int error = errno;
    if (error == EROFS || error == EACCES || error == EPERM) {
      return absl::FailedPreconditionError(absl::StrCat(
          "db: cannot open '", db_path, "' for writing: ", std::strerror(error),
          " (creating ", path,
          "); the coordinator is the database's writer; tools can still "
          "read it"));
    }
    return absl::InternalError(
        absl::StrCat("db: opening ", path, ": ", std::strerror(error)));
  }
  WriterLock lock(fd);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "db: '", db_path, "' already has a writer: ", ReadOwner(fd),
        " (one coordinator per database; talk to it with --coordinator)"));
  }
  if (absl::Status status = WriteOwner(fd, owner); !status.ok()) return status;
  return lock;
}

absl::Status WriterLock::SetOwner(const std::string& owner) {
  return WriteOwner(fd_, owner);
}

WriterLock::WriterLock(WriterLock&& other) noexcept : fd_(other.fd_) {
  other.fd_ = -1;
}

WriterLock& WriterLock::operator=(WriterLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

WriterLock::~WriterLock() {
  if (fd_ >= 0) close(fd_);  // releases the flock
}

}  // namespace moetune::db
