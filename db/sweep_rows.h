// Rows of the sweeps table as the Store reads them, with each sweep's trial
// counts. Internal to db/; functions take the open connection. Not
// thread-safe (the Store's lock guards the connection).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "db/sqlite.h"
#include "proto/moetune.pb.h"

namespace moetune::db {

absl::Status FillTrialCounts(Connection& conn, v1::Sweep* sweep);

absl::StatusOr<v1::Sweep> SweepFromRow(Connection& conn, const Statement& row);

absl::StatusOr<std::vector<v1::Sweep>> SelectSweeps(Connection& conn,
                                                    std::string_view tail,
                                                    int64_t param);

}  // namespace moetune::db
