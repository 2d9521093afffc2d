#include "db/sqlite.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune::db {
namespace {

using ::testing::HasSubstr;

Connection OpenMemory() {
  absl::StatusOr<Connection> conn = Connection::Open(":memory:");
  EXPECT_TRUE(conn.ok()) << conn.status();
  return std::move(conn).value();
}

TEST(SqliteTest, BindAndReadEveryType) {
  Connection conn = OpenMemory();
  ASSERT_TRUE(conn.Exec("CREATE TABLE t (i INTEGER, d REAL, s TEXT, b BLOB, "
                        "n INTEGER)")
                  .ok());
  const std::string blob("a\0b\xff", 4);  // embedded NUL and a high byte
  ASSERT_TRUE(conn.Execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)",
                           int64_t{-9007199254740993}, 0.25,
                           std::string("héllo"), BlobRef{blob}, NullRef{})
                  .ok());
  absl::StatusOr<Statement> stmt = conn.Prepare("SELECT i, d, s, b, n FROM t");
  ASSERT_TRUE(stmt.ok()) << stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  ASSERT_TRUE(row.ok() && *row);
  EXPECT_EQ(stmt->Int64(0), -9007199254740993);
  EXPECT_EQ(stmt->Double(1), 0.25);
  EXPECT_EQ(stmt->Text(2), "héllo");
  EXPECT_EQ(stmt->Blob(3), blob);
  EXPECT_EQ(stmt->Blob(3).size(), 4u);
  EXPECT_TRUE(stmt->IsNull(4));
  EXPECT_FALSE(stmt->IsNull(0));
  row = stmt->Step();
  ASSERT_TRUE(row.ok());
  EXPECT_FALSE(*row);
}

TEST(SqliteTest, EmptyBlobIsNotNull) {
  Connection conn = OpenMemory();
  ASSERT_TRUE(conn.Exec("CREATE TABLE t (b BLOB NOT NULL)").ok());
  ASSERT_TRUE(conn.Execute("INSERT INTO t VALUES (?)", BlobRef{""}).ok());
  absl::StatusOr<int64_t> length = conn.QueryInt64("SELECT length(b) FROM t");
  ASSERT_TRUE(length.ok()) << length.status();
  EXPECT_EQ(*length, 0);
  absl::StatusOr<std::string> type = conn.QueryText("SELECT typeof(b) FROM t");
  ASSERT_TRUE(type.ok());
  EXPECT_EQ(*type, "blob");
}

TEST(SqliteTest, BoolBindsAsZeroOrOne) {
  Connection conn = OpenMemory();
  ASSERT_TRUE(conn.Exec("CREATE TABLE t (x INTEGER)").ok());
  ASSERT_TRUE(conn.Execute("INSERT INTO t VALUES (?), (?)", true, false).ok());
  absl::StatusOr<int64_t> sum = conn.QueryInt64("SELECT SUM(x) FROM t");
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(*sum, 1);
  EXPECT_EQ(conn.Changes(), 2);
}

TEST(SqliteTest, ErrorsCarryTheStatementAndAMeaningfulCode) {
  Connection conn = OpenMemory();
  absl::StatusOr<Statement> bad = conn.Prepare("SELEC 1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(bad.status().message(), HasSubstr("SELEC 1"));

  ASSERT_TRUE(conn.Exec("CREATE TABLE t (x INTEGER PRIMARY KEY)").ok());
  ASSERT_TRUE(conn.Execute("INSERT INTO t VALUES (?)", 1).ok());
  absl::Status dup = conn.Execute("INSERT INTO t VALUES (?)", 1);
  EXPECT_EQ(dup.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(dup.message(), HasSubstr("UNIQUE constraint failed"));

  absl::Status range = conn.Execute("INSERT INTO t VALUES (?)", 1, 2);
  EXPECT_EQ(range.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(range.message(), HasSubstr("parameter 2"));
}

TEST(SqliteTest, RunRefusesAStatementThatReturnsRows) {
  Connection conn = OpenMemory();
  EXPECT_FALSE(conn.Execute("SELECT 1").ok());
}

TEST(SqliteTest, TransactionRollsBackUnlessCommitted) {
  Connection conn = OpenMemory();
  ASSERT_TRUE(conn.Exec("CREATE TABLE t (x INTEGER)").ok());
  {
    absl::StatusOr<Transaction> txn = Transaction::Begin(conn);
    ASSERT_TRUE(txn.ok()) << txn.status();
    EXPECT_FALSE(conn.AutoCommit());
    ASSERT_TRUE(conn.Execute("INSERT INTO t VALUES (?)", 1).ok());
  }  // dropped: rolled back
  EXPECT_TRUE(conn.AutoCommit());
  EXPECT_EQ(*conn.QueryInt64("SELECT COUNT(*) FROM t"), 0);
  {
    absl::StatusOr<Transaction> txn = Transaction::Begin(conn);
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE(conn.Execute("INSERT INTO t VALUES (?)", 2).ok());
    ASSERT_TRUE(txn->Commit().ok());
    EXPECT_FALSE(txn->Commit().ok());  // already finished
  }
  EXPECT_EQ(*conn.QueryInt64("SELECT SUM(x) FROM t"), 2);
}

TEST(SqliteTest, FailedCommitIsRolledBack) {
  Connection conn = OpenMemory();
  ASSERT_TRUE(conn.Exec("CREATE TABLE t (x INTEGER)").ok());
  {
    absl::StatusOr<Transaction> txn = Transaction::Begin(conn);
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE(conn.Execute("INSERT INTO t VALUES (?)", 7).ok());
    conn.InjectFaultForTesting("COMMIT");
    EXPECT_EQ(txn->Commit().code(), absl::StatusCode::kInternal);
  }
  EXPECT_TRUE(conn.AutoCommit());
  EXPECT_EQ(*conn.QueryInt64("SELECT COUNT(*) FROM t"), 0);
}

TEST(SqliteTest, InjectedFaultHitsOnlyTheChosenMatch) {
  Connection conn = OpenMemory();
  ASSERT_TRUE(conn.Exec("CREATE TABLE t (x INTEGER)").ok());
  conn.InjectFaultForTesting("INSERT INTO t", /*skip=*/2);
  EXPECT_TRUE(conn.Execute("INSERT INTO t VALUES (?)", 1).ok());
  EXPECT_TRUE(conn.Execute("UPDATE t SET x = x WHERE x > ?", 5).ok());
  EXPECT_TRUE(conn.Execute("INSERT INTO t VALUES (?)", 2).ok());
  absl::Status third = conn.Execute("INSERT INTO t VALUES (?)", 3);
  EXPECT_EQ(third.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(third.message(), HasSubstr("injected fault"));
  // One-shot: the next one goes through.
  EXPECT_TRUE(conn.Execute("INSERT INTO t VALUES (?)", 4).ok());
  EXPECT_EQ(*conn.QueryInt64("SELECT SUM(x) FROM t"), 1 + 2 + 4);
}

TEST(SqliteTest, LastInsertRowId) {
  Connection conn = OpenMemory();
  ASSERT_TRUE(
      conn.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, x)")
          .ok());
  ASSERT_TRUE(conn.Execute("INSERT INTO t (x) VALUES (?)", 10).ok());
  ASSERT_TRUE(conn.Execute("INSERT INTO t (x) VALUES (?)", 20).ok());
  EXPECT_EQ(conn.LastInsertRowId(), 2);
}

TEST(SqliteTest, OpenFailsInAMissingDirectory) {
  absl::StatusOr<Connection> conn =
      Connection::Open("/nonexistent-moetune-dir/x.db");
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(conn.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(conn.status().message(), HasSubstr("/nonexistent-moetune-dir"));
}

}  // namespace
}  // namespace moetune::db
