// The database schema as an append-only list of migration scripts, and the
// code that brings a database up to date. PRAGMA user_version holds how many
// scripts a database has applied; each script runs in its own write
// transaction together with the user_version bump, so a crash leaves the
// database at a whole version. The scripts make tables, columns and
// indexes; the views are not migrated (db/views.h).
//
// Thread-safety: functions here use the Connection they are given and must not
// run concurrently with other users of it.
#pragma once

#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "db/sqlite.h"

namespace moetune::db {

// The shipped migrations: script i (0-based) takes the schema from version i
// to version i + 1.
std::span<const std::string_view> ShippedMigrations();

// The version a database has after every shipped migration.
int LatestMigrationVersion();

// PRAGMA user_version of the open database.
absl::StatusOr<int> ReadUserVersion(Connection& conn);

// Applies the scripts the database has not applied yet, one transaction each,
// and returns the resulting version. A database whose version is newer than
// scripts.size() is refused with FAILED_PRECONDITION naming both versions
// (its data was written by a newer moetune this build does not understand).
absl::StatusOr<int> Migrate(Connection& conn,
                            std::span<const std::string_view> scripts);

}  // namespace moetune::db
