// WriterLock: the database has one writer. The coordinator that opens a
// database file for writing holds an exclusive flock on "<db>.lock" for its
// whole life, and writes who it is into that file, so that a second
// coordinator on the same file is refused with the owner's identity instead
// of racing the first. The lock goes with the process (a crash releases it).
// Not thread-safe; owned by the Store.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace moetune::db {

class WriterLock {
 public:
  // Takes the lock of the database at `db_path` and records `owner` in it.
  // FAILED_PRECONDITION naming the holder when another process has it;
  // FAILED_PRECONDITION for a read-only file system; INTERNAL otherwise.
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
  explicit WriterLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Who is asking: "pid 123 on host h, since 2026-12-01T10:00:00Z" plus
// `what` when given.
std::string DescribeThisProcess(const std::string& what);

}  // namespace moetune::db
