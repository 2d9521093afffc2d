#include "db/sqlite.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"

namespace moetune::db {
namespace {

absl::string_view AsAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// Busy and locked are worth retrying; a violated constraint is a caller's
// precondition; anything else is the store's own failure.
absl::StatusCode CodeFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CONSTRAINT:
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_CANTOPEN:  // e.g. the directory does not exist
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return absl::StatusCode::kPermissionDenied;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    case SQLITE_RANGE:
    case SQLITE_MISMATCH:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

// ------------------------------------------------------------- Statement --

void Statement::Finalizer::operator()(sqlite3_stmt* stmt) const {
  sqlite3_finalize(stmt);
}

absl::Status Statement::BindResult(int rc, int index) {
  if (rc == SQLITE_OK) return absl::OkStatus();
  return conn_->Error(
      rc, absl::StrCat("binding parameter ", index, " of ", AsAbsl(sql())));
}

absl::Status Statement::Bind(int index, int64_t value) {
  return BindResult(sqlite3_bind_int64(stmt_.get(), index, value), index);
}

absl::Status Statement::Bind(int index, double value) {
  return BindResult(sqlite3_bind_double(stmt_.get(), index, value), index);
}

absl::Status Statement::Bind(int index, std::string_view text) {
  // SQLITE_TRANSIENT: SQLite copies, so the caller's buffer may go away.
  return BindResult(
      sqlite3_bind_text64(stmt_.get(), index, text.data(), text.size(),
                          SQLITE_TRANSIENT, SQLITE_UTF8),
      index);
}

absl::Status Statement::Bind(int index, BlobRef blob) {
  // A zero-length blob with a null pointer would bind NULL; use zeroblob.
  if (blob.bytes.empty()) {
    return BindResult(sqlite3_bind_zeroblob(stmt_.get(), index, 0), index);
  }
  return BindResult(sqlite3_bind_blob64(stmt_.get(), index, blob.bytes.data(),
                                        blob.bytes.size(), SQLITE_TRANSIENT),
                    index);
}

absl::Status Statement::Bind(int index, NullRef) {
  return BindResult(sqlite3_bind_null(stmt_.get(), index), index);
}

absl::StatusOr<bool> Statement::Step() {
  absl::Status fault = conn_->CheckInjectedFault(sql());
  if (!fault.ok()) return fault;
  const int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return conn_->Error(rc, sql());
}

absl::Status Statement::Run() {
  absl::StatusOr<bool> row = Step();
  if (!row.ok()) return row.status();
  if (*row) {
    return absl::InternalError(absl::StrCat(
        "statement returned rows where none were expected: ", AsAbsl(sql())));
  }
  return absl::OkStatus();
}

void Statement::Reset() { sqlite3_reset(stmt_.get()); }

int Statement::ColumnCount() const { return sqlite3_column_count(stmt_.get()); }

bool Statement::IsNull(int col) const {
  return sqlite3_column_type(stmt_.get(), col) == SQLITE_NULL;
}

int64_t Statement::Int64(int col) const {
  return sqlite3_column_int64(stmt_.get(), col);
}

double Statement::Double(int col) const {
  return sqlite3_column_double(stmt_.get(), col);
}

std::string Statement::Text(int col) const {
  const unsigned char* text = sqlite3_column_text(stmt_.get(), col);
  const int size = sqlite3_column_bytes(stmt_.get(), col);
  if (text == nullptr) return std::string();
  return std::string(reinterpret_cast<const char*>(text), size);
}

std::string Statement::Blob(int col) const {
  // sqlite3_column_blob before sqlite3_column_bytes: the documented order.
  const void* blob = sqlite3_column_blob(stmt_.get(), col);
  const int size = sqlite3_column_bytes(stmt_.get(), col);
  if (blob == nullptr) return std::string();
  return std::string(static_cast<const char*>(blob), size);
}

std::string_view Statement::sql() const {
  const char* text = sqlite3_sql(stmt_.get());
  return text == nullptr ? std::string_view() : std::string_view(text);
}

// ------------------------------------------------------------ Connection --

void Connection::Closer::operator()(sqlite3* db) const {
  // _v2: statements still alive keep the handle as a zombie, never a crash.
  sqlite3_close_v2(db);
}

bool Connection::IsReadOnly() const {
  return sqlite3_db_readonly(db_.get(), "main") == 1;
}

absl::StatusOr<Connection> Connection::OpenTarget(const std::string& target,
                                                  int flags,
                                                  const std::string& path) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(target.c_str(), &raw,
                                 flags | SQLITE_OPEN_NOMUTEX, nullptr);
  Connection conn(raw);  // owns the handle even when opening failed
  if (rc != SQLITE_OK) {
    if (raw == nullptr) {
      return absl::ResourceExhaustedError("sqlite3_open_v2: out of memory");
    }
    return conn.Error(rc, absl::StrCat("opening database '", path, "'"));
  }
  sqlite3_extended_result_codes(raw, 1);
  return conn;
}

absl::StatusOr<Connection> Connection::Open(const std::string& path,
                                            bool read_only) {
  return OpenTarget(path,
                    read_only ? SQLITE_OPEN_READONLY
                              : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                    path);
}

absl::StatusOr<Connection> Connection::OpenImmutable(const std::string& path) {
  // A URI: '%', '?' and '#' in the path must be escaped.
  std::string uri = "file:";
  for (const char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      absl::StrAppend(&uri, absl::StrFormat("%%%02X", c));
    } else {
      uri += c;
    }
  }
  uri += "?immutable=1";
  return OpenTarget(uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, path);
}

absl::StatusOr<Statement> Connection::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v2(
      db_.get(), sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return Error(rc, absl::StrCat("preparing ", AsAbsl(sql)));
  }
  if (stmt == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("no SQL statement in '", AsAbsl(sql), "'"));
  }
  return Statement(this, stmt);
}

absl::Status Connection::Exec(std::string_view sql) {
  absl::Status fault = CheckInjectedFault(sql);
  if (!fault.ok()) return fault;
  const std::string text(sql);  // sqlite3_exec wants a NUL-terminated string
  const int rc =
      sqlite3_exec(db_.get(), text.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return Error(rc, sql);
  return absl::OkStatus();
}

absl::StatusOr<Statement> Connection::FirstRow(std::string_view sql) {
  absl::StatusOr<Statement> stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    return absl::InternalError(
        absl::StrCat("query returned no row: ", AsAbsl(sql)));
  }
  return stmt;
}

absl::StatusOr<int64_t> Connection::QueryInt64(std::string_view sql) {
  absl::StatusOr<Statement> stmt = FirstRow(sql);
  if (!stmt.ok()) return stmt.status();
  return stmt->Int64(0);
}

absl::StatusOr<std::string> Connection::QueryText(std::string_view sql) {
  absl::StatusOr<Statement> stmt = FirstRow(sql);
  if (!stmt.ok()) return stmt.status();
  return stmt->Text(0);
}

int64_t Connection::LastInsertRowId() const {
  return sqlite3_last_insert_rowid(db_.get());
}

int64_t Connection::Changes() const { return sqlite3_changes64(db_.get()); }

bool Connection::AutoCommit() const {
  return sqlite3_get_autocommit(db_.get()) != 0;
}

absl::Status Connection::Error(int rc, std::string_view what) const {
  const char* message =
      db_ != nullptr ? sqlite3_errmsg(db_.get()) : sqlite3_errstr(rc);
  return absl::Status(CodeFor(rc), absl::StrCat("sqlite: ", message, " (code ",
                                                rc, ") in ", AsAbsl(what)));
}

void Connection::InjectFaultForTesting(std::string sql_substring, int skip) {
  fault_sql_ = std::move(sql_substring);
  fault_skip_ = skip;
}

absl::Status Connection::CheckInjectedFault(std::string_view sql) {
  if (fault_sql_.empty() || sql.find(fault_sql_) == std::string_view::npos) {
    return absl::OkStatus();
  }
  if (fault_skip_ > 0) {
    --fault_skip_;
    return absl::OkStatus();
  }
  fault_sql_.clear();
  return absl::InternalError(absl::StrCat("injected fault in ", AsAbsl(sql)));
}

// ----------------------------------------------------------- Transaction --

absl::StatusOr<Transaction> Transaction::Begin(Connection& conn) {
  absl::Status status = conn.Exec("BEGIN IMMEDIATE");
  if (!status.ok()) return status;
  return Transaction(&conn);
}

Transaction::Transaction(Transaction&& other) noexcept
    : conn_(std::exchange(other.conn_, nullptr)) {}

Transaction::~Transaction() {
  // An error such as SQLITE_FULL may already have rolled the transaction
  // back; ROLLBACK then would only fail with "no transaction is active".
  if (conn_ == nullptr || conn_->AutoCommit()) return;
  absl::Status status = conn_->Exec("ROLLBACK");
  if (!status.ok()) LogError("rollback failed: ", status.ToString());
}

absl::Status Transaction::Commit() {
  if (conn_ == nullptr) {
    return absl::FailedPreconditionError("transaction already finished");
  }
  absl::Status status = conn_->Exec("COMMIT");
  // On failure the destructor rolls back whatever is still open.
  if (status.ok()) conn_ = nullptr;
  return status;
}

}  // namespace moetune::db
