// WriterLock: the database has one writer. The coordinator that opens a
// database file for writing holds an exclusive flock on the database file
// itself for its whole life, so that the lock follows the file (its device
// and inode), not the name: a second coordinator reaching the same file
// through a symlink or a hard link is refused like one on the same path.
// SQLite's own locks are POSIX record locks, which Linux keeps apart from
// flock. Who holds the lock is written to "<db>.lock" beside the name it was
// taken by, once the lock is held, and removed when it is released; a refused
// process writes nothing. The lock goes with the process (a crash releases
// it, leaving only the stale "<db>.lock", which the next holder overwrites).
// Not thread-safe; owned by the Store.
#pragma once

#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace moetune::db {

class WriterLock {
 public:
  // Takes the lock of the database at `db_path` (creating the file, empty,
  // when there is none) and records `owner` beside it. FAILED_PRECONDITION
  // naming the holder when another process has it; FAILED_PRECONDITION for
  // a read-only file or file system; INTERNAL otherwise.
  static absl::StatusOr<WriterLock> Acquire(const std::string& db_path,
                                            const std::string& owner);
  WriterLock(WriterLock&& other) noexcept;
  WriterLock& operator=(WriterLock&& other) noexcept;
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
  ~WriterLock();

  // Replaces the recorded owner (e.g. once the listening port is known).
  absl::Status SetOwner(const std::string& owner);

 private:
  WriterLock(int fd, std::string owner_path)
      : fd_(fd), owner_path_(std::move(owner_path)) {}
  void Release();

  int fd_ = -1;             // the database file, flocked
  std::string owner_path_;  // "<db>.lock"
};

// Who is asking: "pid 123 on host h, since 2026-12-01T10:00:00Z" plus
// `what` when given.
std::string DescribeThisProcess(const std::string& what);

}  // namespace moetune::db
