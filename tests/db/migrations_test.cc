#include "db/migrations.h"

#include <string>
#include <string_view>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune::db {
namespace {

using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

Connection OpenMemory() {
  absl::StatusOr<Connection> conn = Connection::Open(":memory:");
  EXPECT_TRUE(conn.ok()) << conn.status();
  return std::move(conn).value();
}

std::vector<std::string> SchemaNames(Connection& conn, const char* type) {
  absl::StatusOr<Statement> stmt = conn.Prepare(
      "SELECT name FROM sqlite_master WHERE type = ? ORDER BY name");
  EXPECT_TRUE(stmt.ok());
  EXPECT_TRUE(stmt->BindAll(type).ok());
  std::vector<std::string> names;
  while (*stmt->Step()) names.push_back(stmt->Text(0));
  return names;
}

TEST(MigrationsTest, ShippedMigrationsBuildTheSchemaFromZero) {
  Connection conn = OpenMemory();
  ASSERT_EQ(*ReadUserVersion(conn), 0);
  absl::StatusOr<int> version = Migrate(conn, ShippedMigrations());
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, LatestMigrationVersion());
  EXPECT_EQ(*ReadUserVersion(conn), LatestMigrationVersion());
  EXPECT_GE(LatestMigrationVersion(), 1);
  EXPECT_THAT(SchemaNames(conn, "table"),
              IsSupersetOf({"fingerprints", "probes", "results", "sweeps",
                            "trials", "workers"}));
  EXPECT_THAT(SchemaNames(conn, "index"),
              IsSupersetOf({"trials_by_sweep_state", "trials_by_workload",
                            "probes_by_worker"}));
  // Up to date: a second run is a no-op.
  version = Migrate(conn, ShippedMigrations());
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, LatestMigrationVersion());
}

// Script 2 counts its own runs, so a re-run would show.
constexpr std::string_view kScripts[] = {
    "CREATE TABLE a (x INTEGER); CREATE TABLE runs (n INTEGER);",
    "INSERT INTO runs VALUES (2);",
    "ALTER TABLE a ADD COLUMN y TEXT; INSERT INTO runs VALUES (3);",
};

TEST(MigrationsTest, AppliesOnlyTheMissingScripts) {
  Connection conn = OpenMemory();
  absl::StatusOr<int> version =
      Migrate(conn, std::span<const std::string_view>(kScripts, 2));
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 2);
  EXPECT_EQ(*conn.QueryInt64("SELECT COUNT(*) FROM runs"), 1);

  version = Migrate(conn, kScripts);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 3);
  // Script 2 did not run again; script 3 ran once.
  EXPECT_EQ(*conn.QueryInt64("SELECT COUNT(*) FROM runs WHERE n = 2"), 1);
  EXPECT_EQ(*conn.QueryInt64("SELECT COUNT(*) FROM runs WHERE n = 3"), 1);
  EXPECT_TRUE(conn.Execute("INSERT INTO a (x, y) VALUES (?, ?)", 1, "y").ok());
}

TEST(MigrationsTest, NewerDatabaseIsRefusedNamingBothVersions) {
  Connection conn = OpenMemory();
  ASSERT_TRUE(conn.Exec("PRAGMA user_version = 7").ok());
  absl::StatusOr<int> version = Migrate(conn, kScripts);
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(version.status().message(), HasSubstr("version 7"));
  EXPECT_THAT(version.status().message(), HasSubstr("latest 3"));
  EXPECT_EQ(*ReadUserVersion(conn), 7);  // untouched
  EXPECT_TRUE(conn.AutoCommit());
}

TEST(MigrationsTest, AFailingScriptLeavesThePreviousVersionWhole) {
  constexpr std::string_view kBroken[] = {
      "CREATE TABLE a (x INTEGER);",
      "CREATE TABLE b (x INTEGER); INSERT INTO missing VALUES (1);",
  };
  Connection conn = OpenMemory();
  absl::StatusOr<int> version = Migrate(conn, kBroken);
  ASSERT_FALSE(version.ok());
  EXPECT_THAT(version.status().message(),
              HasSubstr("migration to schema version 2 failed"));
  EXPECT_THAT(version.status().message(), HasSubstr("no such table: missing"));
  EXPECT_EQ(*ReadUserVersion(conn), 1);
  const std::vector<std::string> tables = SchemaNames(conn, "table");
  EXPECT_EQ(tables, std::vector<std::string>{"a"});  // no half of version 2
  EXPECT_TRUE(conn.AutoCommit());
}

}  // namespace
}  // namespace moetune::db
