// Store: opening the database (pragmas, migrations) and reading its settings.
#include "db/store.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "db/codec.h"
#include "db/migrations.h"
#include "db/sweep_rows.h"
#include "db/trial_rows.h"

namespace moetune::db {

using v1::SweepState;
using v1::TrialState;

namespace {

constexpr int kBusyTimeoutMs = 5000;

// --------------------------------------------------------------- opening --

// Pragmas are per connection and must be set outside a transaction.
absl::Status Configure(Connection& conn) {
  // First, so that switching to WAL waits for other users of the file.
  RETURN_IF_ERROR(
      conn.Exec(absl::StrCat("PRAGMA busy_timeout = ", kBusyTimeoutMs)));
  ASSIGN_OR_RETURN(const std::string mode,
                   conn.QueryText("PRAGMA journal_mode = WAL"));
  // An in-memory database has no journal file and reports "memory".
  if (mode != "wal" && mode != "memory") {
    return absl::FailedPreconditionError(
        absl::StrCat("journal_mode is '", mode,
                     "' after asking for WAL; the file system may not "
                     "support WAL"));
  }
  RETURN_IF_ERROR(conn.Exec("PRAGMA synchronous = FULL"));
  RETURN_IF_ERROR(conn.Exec("PRAGMA foreign_keys = ON"));
  ASSIGN_OR_RETURN(const int64_t fk, conn.QueryInt64("PRAGMA foreign_keys"));
  if (fk != 1) {
    return absl::FailedPreconditionError(
        "this SQLite build cannot enforce foreign keys");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  ASSIGN_OR_RETURN(Connection conn, Connection::Open(path));
  RETURN_IF_ERROR(Configure(conn));
  ASSIGN_OR_RETURN(const int version, Migrate(conn, ShippedMigrations()));
  return std::unique_ptr<Store>(new Store(std::move(conn), version));
}

int Store::LatestSchemaVersion() { return LatestMigrationVersion(); }

absl::StatusOr<StoreSettings> Store::Settings() {
  absl::MutexLock lock(&mu_);
  StoreSettings settings;
  ASSIGN_OR_RETURN(settings.journal_mode,
                   conn_.QueryText("PRAGMA journal_mode"));
  ASSIGN_OR_RETURN(const int64_t synchronous,
                   conn_.QueryInt64("PRAGMA synchronous"));
  ASSIGN_OR_RETURN(const int64_t foreign_keys,
                   conn_.QueryInt64("PRAGMA foreign_keys"));
  ASSIGN_OR_RETURN(const int64_t busy_timeout,
                   conn_.QueryInt64("PRAGMA busy_timeout"));
  settings.synchronous = static_cast<int>(synchronous);
  settings.foreign_keys = foreign_keys != 0;
  settings.busy_timeout_ms = static_cast<int>(busy_timeout);
  return settings;
}

void Store::InjectFaultForTesting(std::string sql_substring, int skip) {
  absl::MutexLock lock(&mu_);
  conn_.InjectFaultForTesting(std::move(sql_substring), skip);
}

}  // namespace moetune::db
