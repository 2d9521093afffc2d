// A CLI session with a coordinator: a remote one (--coordinator, with its
// token and TLS), or an embedded one on the local database (and, for
// sweeps, local workers); and the calls every command shares: listings that
// follow pages to their end, and an idempotent, retried submit.
// Not thread-safe; one per command.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "coordinator/cli/commands.h"
#include "coordinator/cli/local_cluster.h"
#include "proto/moetune.grpc.pb.h"

namespace moetune::cli {

struct Session {
  std::unique_ptr<LocalCluster> cluster;  // null when remote
  std::unique_ptr<v1::Moetune::Stub> stub;
};

absl::Status FromGrpc(const grpc::Status& status);
// Prints "moetune: <message>" and returns the exit code: 2 for bad input
// (InvalidArgument), 1 for anything else (not found, unreachable, ...).
int Fail(const absl::Status& status);
// "--format: 'markdown' is not allowed for <command>; ..." (exit 2).
int FailFormat(const CommandOptions& options);

// What a command does with the database: queries open an embedded
// coordinator's database read-only (beside a running coordinator, or on a
// read-only mount); submit and cancel write; a sweep also starts workers.
// Only a sweep creates a database: any other command on a --db that does
// not exist is NotFound, and the file is not made.
enum class Access { kRead, kWrite, kWriteWithWorkers };

absl::StatusOr<Session> Open(const CommandOptions& options, Access access);

// Every trial the filter selects (at most filter.limit), page by page.
absl::StatusOr<v1::QueryTrialsResponse> Trials(Session& session,
                                               v1::TrialFilter filter);
// Every sweep (at most `limit`), newest first, page by page.
absl::StatusOr<v1::ListSweepsResponse> Sweeps(Session& session, int limit);
absl::StatusOr<v1::Sweep> GetSweep(Session& session, int64_t sweep_id);
// The sweep a command is about: `sweep_id`, or (0) the newest one.
absl::StatusOr<int64_t> ResolveSweep(Session& session, int64_t sweep_id);
absl::StatusOr<v1::GetBestResponse> Best(Session& session,
                                         const v1::GetBestRequest& request);
// SubmitSweep with a fresh request id, retried while the coordinator is
// unreachable: a retry never makes a second sweep.
absl::StatusOr<v1::SubmitSweepResponse> Submit(Session& session,
                                               const v1::SweepSpec& spec);

}  // namespace moetune::cli
