// A small RAII layer over the SQLite C API: a Connection (one sqlite3*), a
// Statement (one prepared sqlite3_stmt*: binding, stepping, reading columns)
// and a Transaction (BEGIN IMMEDIATE ... COMMIT, rolled back when dropped
// uncommitted). Every SQLite error becomes an absl::Status that carries
// SQLite's message and the statement's text.
//
// Thread-safety: none. A Connection and the Statements prepared on it must be
// used by one thread at a time (the Store serialises them behind its mutex);
// the connection is opened with SQLITE_OPEN_NOMUTEX for that reason. A
// Statement must not outlive its Connection.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace moetune::db {

class Connection;

// Wraps bytes that bind as a BLOB (a plain std::string_view binds as TEXT).
struct BlobRef {
  std::string_view bytes;
};

// Binds as SQL NULL.
struct NullRef {};

class Statement {
 public:
  Statement(Statement&&) noexcept = default;
  Statement& operator=(Statement&&) noexcept = default;

  // Parameters are 1-based, as in SQLite.
  absl::Status Bind(int index, int64_t value);
  absl::Status Bind(int index, int value) {
    return Bind(index, static_cast<int64_t>(value));
  }
  absl::Status Bind(int index, bool value) {
    return Bind(index, static_cast<int64_t>(value ? 1 : 0));
  }
  absl::Status Bind(int index, double value);
  absl::Status Bind(int index, std::string_view text);
  absl::Status Bind(int index, const std::string& text) {
    return Bind(index, std::string_view(text));
  }
  absl::Status Bind(int index, const char* text) {
    return Bind(index, std::string_view(text));
  }
  absl::Status Bind(int index, BlobRef blob);
  absl::Status Bind(int index, NullRef);

  // Binds args to parameters 1..N in order.
  template <typename... Args>
  absl::Status BindAll(const Args&... args) {
    int index = 0;
    absl::Status status;
    // Stops at the first failure; later binds are skipped.
    ((status.ok() ? (status = Bind(++index, args), 0) : 0), ...);
    return status;
  }

  // One step: true when a row is ready to read, false when done.
  absl::StatusOr<bool> Step();
  // Steps until done; an error if the statement returns a row.
  absl::Status Run();
  // Makes the statement ready to step again (bindings are kept).
  void Reset();

  int ColumnCount() const;
  bool IsNull(int col) const;
  int64_t Int64(int col) const;
  double Double(int col) const;
  std::string Text(int col) const;
  std::string Blob(int col) const;

  std::string_view sql() const;

 private:
  friend class Connection;
  struct Finalizer {
    void operator()(sqlite3_stmt* stmt) const;
  };
  Statement(Connection* conn, sqlite3_stmt* stmt) : conn_(conn), stmt_(stmt) {}
  absl::Status BindResult(int rc, int index);

  Connection* conn_;
  std::unique_ptr<sqlite3_stmt, Finalizer> stmt_;
};

class Connection {
 public:
  // Opens (creating if needed) the database at `path`; ":memory:" gives a
  // private in-memory database. No pragmas are set here: the caller decides.
  // `read_only`: open an existing database without writing to it.
  static absl::StatusOr<Connection> Open(const std::string& path,
                                         bool read_only = false);
  // Opens a database nobody can be writing (it sits on a read-only file
  // system), read-only and without the WAL's shared-memory file, which
  // SQLite could not create there.
  static absl::StatusOr<Connection> OpenImmutable(const std::string& path);
  // True when SQLite opened the database read-only (the file or its
  // directory is not writable, or read_only was asked).
  bool IsReadOnly() const;

  Connection(Connection&&) noexcept = default;
  Connection& operator=(Connection&&) noexcept = default;

  absl::StatusOr<Statement> Prepare(std::string_view sql);
  // Runs one or more ';'-separated statements that return no rows of
  // interest (DDL, pragmas, BEGIN/COMMIT).
  absl::Status Exec(std::string_view sql);
  // Prepares, binds args to 1..N and runs to completion.
  template <typename... Args>
  absl::Status Execute(std::string_view sql, const Args&... args);
  // The first column of the first row of a query (e.g. a PRAGMA or COUNT).
  absl::StatusOr<int64_t> QueryInt64(std::string_view sql);
  absl::StatusOr<std::string> QueryText(std::string_view sql);

  int64_t LastInsertRowId() const;
  // Rows changed by the last INSERT/UPDATE/DELETE.
  int64_t Changes() const;
  // True while no transaction is open.
  bool AutoCommit() const;

  // The status for SQLite result code `rc`, with the connection's message and
  // `what` (usually the statement) for context.
  absl::Status Error(int rc, std::string_view what) const;

  // Fault injection for rollback tests (cf. leveldb's fault_injection_test):
  // the (skip + 1)-th Step() from now of a statement whose SQL contains
  // `sql_substring` fails with INTERNAL before touching the database.
  void InjectFaultForTesting(std::string sql_substring, int skip = 0);

 private:
  // sqlite3_open_v2 of `target` (a path or a URI) with `flags`; errors name
  // `path`.
  static absl::StatusOr<Connection> OpenTarget(const std::string& target,
                                               int flags,
                                               const std::string& path);
  friend class Statement;
  struct Closer {
    void operator()(sqlite3* db) const;
  };
  explicit Connection(sqlite3* db) : db_(db) {}
  // The query prepared and stepped to its first row (an error if none).
  absl::StatusOr<Statement> FirstRow(std::string_view sql);
  // Consumes the injected fault if `sql` matches it.
  absl::Status CheckInjectedFault(std::string_view sql);

  std::unique_ptr<sqlite3, Closer> db_;
  std::string fault_sql_;
  int fault_skip_ = 0;
};

// A write transaction: BEGIN IMMEDIATE takes the write lock up front so that a
// busy database fails (after busy_timeout) at the start, not half-way. Dropped
// without Commit(), it rolls back.
class Transaction {
 public:
  static absl::StatusOr<Transaction> Begin(Connection& conn);

  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  ~Transaction();

  absl::Status Commit();

 private:
  explicit Transaction(Connection* conn) : conn_(conn) {}
  Connection* conn_;  // null once committed, rolled back or moved from
};

template <typename... Args>
absl::Status Connection::Execute(std::string_view sql, const Args&... args) {
  absl::StatusOr<Statement> stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  absl::Status status = stmt->BindAll(args...);
  if (!status.ok()) return status;
  return stmt->Run();
}

}  // namespace moetune::db
