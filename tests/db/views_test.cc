// The views have one definition, with enum names from the proto, and every
// database a writer opens gets it, whatever version it came from; stored
// configs and specs in the legacy all-reduce and attention strings read as
// the enums.
#include "db/views.h"

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "db/migrations.h"
#include "db/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/db/store_test_util.h"

namespace moetune::db {
namespace {

using ::testing::HasSubstr;

class ViewsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("views_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "views.db").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Connection Open() {
    absl::StatusOr<Connection> conn = Connection::Open(path_);
    EXPECT_TRUE(conn.ok()) << conn.status();
    return *std::move(conn);
  }

  // The stored SQL of view `name` ("" when there is none).
  std::string ViewSql(Connection& conn, const std::string& name) {
    absl::StatusOr<std::string> sql = conn.QueryText(
        "SELECT COALESCE((SELECT sql FROM sqlite_master WHERE type = 'view' "
        "AND name = '" +
        name + "'), '')");
    return sql.ok() ? *sql : sql.status().ToString();
  }

  // Writes sweep 1 (`spec`) and trial 1 (`trial`, in `state`) with raw SQL,
  // as an older moetune left them.
  void InsertRaw(Connection& conn, const v1::SweepSpec& spec,
                 const v1::Trial& trial, int state) {
    ASSERT_TRUE(conn.Execute("INSERT INTO sweeps (name, spec, state, "
                             "created_at) VALUES ('old', ?, 1, 0)",
                             BlobRef{spec.SerializeAsString()})
                    .ok());
    ASSERT_TRUE(conn.Execute("INSERT INTO trials (sweep_id, state, attempt, "
                             "moe_backend, workload_hash, workload, config, "
                             "measurement, updated_at) VALUES (1, ?, 0, "
                             "'cpu_reference', 'w7', ?, ?, ?, 0)",
                             int64_t{state},
                             BlobRef{trial.workload().SerializeAsString()},
                             BlobRef{trial.config().SerializeAsString()},
                             BlobRef{v1::Measurement().SerializeAsString()})
                    .ok());
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(ViewsTest, StateAndRegionNamesComeFromTheProto) {
  const std::string sql = ViewDefinitions().front().sql;
  const google::protobuf::EnumDescriptor& states = *v1::TrialState_descriptor();
  for (int i = 0; i < states.value_count(); ++i) {
    if (states.value(i)->number() == 0) continue;
    EXPECT_THAT(
        sql, HasSubstr(absl::StrCat(" WHEN ", states.value(i)->number(),
                                    " THEN '", states.value(i)->name(), "'")));
  }
  EXPECT_THAT(sql, HasSubstr("ELSE 'UNSPECIFIED' END AS state"));
  EXPECT_THAT(sql, HasSubstr("WHEN 2 THEN 'MOE_LAYER' ELSE 'DECODE_STEP' END"));
}

// A database at version 7 with views of an older definition (and one of
// its user's own): the writer's open leaves it at the latest version with
// the current views, the user's view untouched; a second open writes no
// schema at all.
TEST_F(ViewsTest, AnOldDatabaseGetsTheCurrentViews) {
  {
    Connection conn = Open();
    ASSERT_EQ(*Migrate(conn, ShippedMigrations().first(7)), 7);
    ASSERT_TRUE(conn.Exec("CREATE VIEW trial_dimensions AS SELECT id AS "
                          "trial_id, CASE state WHEN 1 THEN 'QUEUED' END AS "
                          "state FROM trials; CREATE VIEW trial_results AS "
                          "SELECT * FROM trial_dimensions; CREATE VIEW mine "
                          "AS SELECT 1 AS one;")
                    .ok());
  }
  ASSERT_TRUE(Store::Open(path_).ok());
  Connection conn = Open();
  EXPECT_EQ(*ReadUserVersion(conn), LatestMigrationVersion());
  for (const ViewDefinition& view : ViewDefinitions()) {
    EXPECT_EQ(ViewSql(conn, view.name), view.sql) << view.name;
  }
  EXPECT_EQ(ViewSql(conn, "mine"), "CREATE VIEW mine AS SELECT 1 AS one");
  const int64_t schema = *conn.QueryInt64("PRAGMA schema_version");
  ASSERT_TRUE(RecreateViews(conn).ok());
  EXPECT_EQ(*conn.QueryInt64("PRAGMA schema_version"), schema);
}

// Rows a version-7 coordinator wrote: the config and the spec in the
// legacy strings, the trial's dimensions not filled yet. Read back, both
// hold the enums; the attention column says dp.
TEST_F(ViewsTest, LegacyStringsInStoredRowsReadAsTheEnums) {
  v1::SweepSpec spec = MakeSpec("old");
  spec.mutable_space()->add_allreduce("nccl");
  spec.mutable_space()->add_allreduce("oneshot");
  spec.mutable_space()->add_attention("dp");
  v1::Trial trial = MakeTrial("cpu_reference", "w7", 4);
  trial.mutable_config()->set_tp(2);
  trial.mutable_config()->set_allreduce("oneshot");
  trial.mutable_config()->set_attention("dp");
  {
    Connection conn = Open();
    ASSERT_EQ(*Migrate(conn, ShippedMigrations().first(7)), 7);
    InsertRaw(conn, spec, trial, 8);
  }
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status();
  const absl::StatusOr<v1::Trial> read = (*store)->GetTrial(1);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->config().all_reduce_impl(), v1::ALL_REDUCE_ONESHOT);
  EXPECT_EQ(read->config().attention_split(), v1::ATTENTION_DP);
  EXPECT_TRUE(read->config().allreduce().empty());
  EXPECT_TRUE(read->config().attention().empty());
  const absl::StatusOr<v1::Sweep> sweep = (*store)->GetSweep(1);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_THAT(
      sweep->spec().space().all_reduce_impls(),
      ::testing::ElementsAre(v1::ALL_REDUCE_NCCL, v1::ALL_REDUCE_ONESHOT));
  EXPECT_THAT(sweep->spec().space().attention_splits(),
              ::testing::ElementsAre(v1::ATTENTION_DP));
  EXPECT_TRUE(sweep->spec().space().allreduce().empty());
  Connection conn = Open();
  EXPECT_EQ(*conn.QueryText("SELECT state || ' ' || tp || ' ' || attention "
                            "FROM trial_dimensions"),
            "TIMEOUT 2 dp");
}

// A stored string that names no value is refused naming the row and the
// field, not read as the default.
TEST_F(ViewsTest, AnUnknownStoredStringIsDataLoss) {
  v1::Trial trial = MakeTrial("cpu_reference", "w7", 4);
  trial.mutable_config()->set_attention("sp");
  {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status();
  }
  {
    Connection conn = Open();
    InsertRaw(conn, MakeSpec("old"), trial, 1);
    // Its dimensions already filled, so the open does not read the config.
    ASSERT_TRUE(conn.Execute("UPDATE trials SET batch_size = 4").ok());
  }
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status();
  const absl::Status status = (*store)->GetTrial(1).status();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_EQ(status.message(),
            "config of trial 1: config.attention: 'sp' is not allowed; "
            "allowed: tp, dp");
}

}  // namespace
}  // namespace moetune::db
