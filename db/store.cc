// Store: opening the database (pragmas, migrations) and reading its settings.
#include "db/store.h"

#include <sys/statvfs.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "db/codec.h"
#include "db/migrations.h"
#include "db/sweep_rows.h"
#include "db/trial_dimensions.h"
#include "db/trial_rows.h"
#include "db/views.h"

namespace moetune::db {

using v1::SweepState;
using v1::TrialState;

namespace {

constexpr int kBusyTimeoutMs = 5000;

// --------------------------------------------------------------- opening --

absl::Status Refuse(const std::string& path, const absl::Status& cause) {
  return absl::FailedPreconditionError(
      absl::StrCat("db: cannot open '", path, "': ", cause.message()));
}

bool OnReadOnlyFileSystem(const std::string& path) {
  struct statvfs fs;
  return statvfs(path.c_str(), &fs) == 0 && (fs.f_flag & ST_RDONLY) != 0;
}

// The directory must exist (SQLite would say only "unable to open"); a
// reader needs the file itself.
absl::Status CheckLocation(const std::string& path, bool writer) {
  const std::filesystem::path file(path);
  const std::filesystem::path dir =
      file.has_parent_path() ? file.parent_path() : ".";
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return absl::FailedPreconditionError(
        absl::StrCat("db: cannot open '", path, "': directory '", dir.string(),
                     "' does not exist"));
  }
  if (!writer && !std::filesystem::exists(file, error)) {
    return absl::FailedPreconditionError(
        absl::StrCat("db: cannot open '", path, "': no such file"));
  }
  return absl::OkStatus();
}

// A file of another application is refused, not migrated beside its
// tables: at schema version 0 it must hold no table yet, and from version 1
// on it must hold moetune's sweeps and trials.
absl::Status CheckOwnSchema(Connection& conn, const std::string& path,
                            int version) {
  ASSIGN_OR_RETURN(
      const std::string tables,
      conn.QueryText("SELECT COALESCE(group_concat(name, ', '), '') FROM "
                     "(SELECT name FROM sqlite_master WHERE type = 'table' "
                     "AND name NOT LIKE 'sqlite_%' ORDER BY name)"));
  if (version == 0 && tables.empty()) return absl::OkStatus();
  if (version > 0) {
    ASSIGN_OR_RETURN(const int64_t own,
                     conn.QueryInt64("SELECT count(*) FROM sqlite_master "
                                     "WHERE type = 'table' AND name IN "
                                     "('sweeps', 'trials')"));
    if (own == 2) return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "db: cannot open '", path, "': not a moetune database (schema version ",
      version, ", tables: ", tables.empty() ? "none" : tables,
      "); left as it is"));
}

// Reads the schema version without writing: refuses a file that is not a
// database, a schema newer than this build, and (for a writer) a database
// SQLite could only open read-only.
absl::StatusOr<int> CheckReadable(Connection& conn, const std::string& path,
                                  bool writer) {
  absl::StatusOr<int64_t> tables =
      conn.QueryInt64("SELECT count(*) FROM sqlite_master");
  if (!tables.ok()) {
    return Refuse(path, absl::Status(tables.status().code(),
                                     absl::StrCat("not a moetune database, or "
                                                  "a corrupt one (",
                                                  tables.status().message(),
                                                  "); left as it is")));
  }
  ASSIGN_OR_RETURN(const int version, ReadUserVersion(conn));
  RETURN_IF_ERROR(CheckOwnSchema(conn, path, version));
  if (version > LatestMigrationVersion()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "db: cannot open '", path, "': its schema is version ", version,
        " and this build knows up to ", LatestMigrationVersion(),
        " (written by a newer moetune); left as it is"));
  }
  if (writer && conn.IsReadOnly()) {
    return absl::FailedPreconditionError(
        absl::StrCat("db: cannot open '", path,
                     "' for writing: it is read-only (file permissions or a "
                     "read-only file system); the coordinator is the "
                     "database's writer"));
  }
  return version;
}

// Pragmas are per connection and must be set outside a transaction.
absl::Status Configure(Connection& conn) {
  // The busy timeout is already set (Open), so that switching to WAL waits
  // for other users of the file.
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

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                                   const OpenOptions& options) {
  const bool file = path != ":memory:";
  if (file) RETURN_IF_ERROR(CheckLocation(path, options.writer));
  std::optional<WriterLock> lock;
  if (file && options.writer) {
    ASSIGN_OR_RETURN(lock, WriterLock::Acquire(path, options.owner));
  }
  absl::StatusOr<Connection> conn = Connection::Open(path, !options.writer);
  // A reader on a read-only file system: the WAL's shared memory cannot be
  // made there, and nobody can be writing the file.
  if (file && !options.writer && OnReadOnlyFileSystem(path)) {
    conn = Connection::OpenImmutable(path);
  }
  if (!conn.ok()) return Refuse(path, conn.status());
  // First: a file another process is recovering or holding (a crashed
  // writer's WAL, a reader mid-transaction) is waited for, not refused.
  RETURN_IF_ERROR(
      conn->Exec(absl::StrCat("PRAGMA busy_timeout = ", kBusyTimeoutMs)));
  // Read before anything is written: not a database, a newer schema and a
  // read-only file are refused with the file as it was.
  absl::StatusOr<int> version = CheckReadable(*conn, path, options.writer);
  if (!version.ok()) return version.status();
  if (!options.writer) {
    return std::unique_ptr<Store>(
        new Store(*std::move(conn), *version, std::nullopt));
  }
  RETURN_IF_ERROR(Configure(*conn));
  ASSIGN_OR_RETURN(const int migrated, Migrate(*conn, ShippedMigrations()));
  RETURN_IF_ERROR(RecreateViews(*conn));
  RETURN_IF_ERROR(FillTrialDimensions(*conn));
  return std::unique_ptr<Store>(
      new Store(*std::move(conn), migrated, std::move(lock)));
}

absl::Status Store::SetOwner(const std::string& owner) {
  return lock_.has_value() ? lock_->SetOwner(owner) : absl::OkStatus();
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
