// The dimension columns and the views that Grafana users query: filled on
// insert, back-filled for rows written before schema version 4, and joined
// with the deciding result.
#include "db/trial_dimensions.h"

#include <filesystem>
#include <string>
#include <vector>

#include "db/migrations.h"
#include "db/store.h"
#include "gtest/gtest.h"
#include "tests/db/store_test_util.h"

namespace moetune::db {
namespace {

class TrialDimensionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("trial_dims_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "dims.db").string();
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // A sweep of one trial: tile 8x128, tp 2 x ep 4, graph on, batch 16.
  int64_t AddTrial() {
    v1::Trial trial = MakeTrial("fused_gemv", "w1", 16);
    trial.mutable_workload()->set_context_length(2048);
    trial.mutable_workload()->set_region(v1::MOE_LAYER);
    trial.mutable_config()->mutable_tile()->set_block_n(8);
    trial.mutable_config()->mutable_tile()->set_block_k(128);
    trial.mutable_config()->set_tp(2);
    trial.mutable_config()->set_ep(4);
    trial.mutable_config()->set_cuda_graph(true);
    std::vector<v1::Trial> trials = {trial};
    EXPECT_TRUE(store_->CreateSweep(MakeSpec("dims"), &trials, kT0).ok());
    return trials[0].trial_id();
  }

  // The view's row for the trial as "col=value" pairs, read by a second
  // connection as Grafana would.
  std::string Row(const std::string& view, const std::string& columns) {
    absl::StatusOr<Connection> conn = Connection::Open(path_, true);
    EXPECT_TRUE(conn.ok()) << conn.status();
    absl::StatusOr<std::string> text =
        conn->QueryText("SELECT " + columns + " FROM " + view + " LIMIT 1");
    return text.ok() ? *text : text.status().ToString();
  }

  // Writes a trial's dimension columns, and runs SQL, through a connection
  // of their own (the tests' stand-ins for rows other versions wrote).
  void WriteDimensions(int64_t id, const v1::Workload& workload,
                       const v1::TrialConfig& config) {
    absl::StatusOr<Connection> conn = Connection::Open(path_);
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE(WriteTrialDimensions(*conn, id, workload, config).ok());
  }
  void Exec(const std::string& sql) {
    absl::StatusOr<Connection> conn = Connection::Open(path_);
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE(conn->Exec(sql).ok()) << sql;
  }

  std::filesystem::path dir_;
  std::string path_;
  std::unique_ptr<Store> store_;
};

constexpr char kDims[] =
    "backend || ' ' || batch || ' ' || context || ' ' || tile || ' ' || tp "
    "|| ' ' || ep || ' ' || graph || ' ' || region || ' ' || state";

TEST_F(TrialDimensionsTest, NewTrialsCarryTheirDimensions) {
  AddTrial();
  EXPECT_EQ(Row("trial_dimensions", kDims),
            "fused_gemv 16 2048 8x128 2 4 1 MOE_LAYER QUEUED");
}

TEST_F(TrialDimensionsTest, TrialResultsJoinsTheDecidingAttempt) {
  const int64_t id = AddTrial();
  ASSERT_TRUE(store_->LeaseTrial(id, "w1", kT0 + 1).ok());
  v1::TrialResult result = MakeResult(id, 1, v1::DONE, 120.0);
  result.mutable_roofline()->set_efficiency(0.5);
  ASSERT_TRUE(store_->RecordResult(result, kT0 + 2).ok());
  EXPECT_EQ(
      Row("trial_results",
          "state || ' ' || median_us || ' ' || efficiency || ' ' || tile"),
      "DONE 120.0 0.5 8x128");
}

// The decode step's formats: the default as 'default' / 'KV_BF16' (also
// for rows from before version 5, whose columns are NULL), other maps as
// their non-default groups.
TEST_F(TrialDimensionsTest, FormatsAreShownBesideTheOtherDimensions) {
  constexpr char kFormats[] = "quantization || ' ' || kv_cache_dtype";
  const int64_t id = AddTrial();
  EXPECT_EQ(Row("trial_dimensions", kFormats), "default KV_BF16");
  store_.reset();  // the writes below are this test's own
  v1::Workload workload;
  workload.mutable_quantization()->set_attention(v1::NVFP4);
  workload.mutable_quantization()->set_lm_head(v1::BF16);  // the default
  workload.mutable_quantization()->set_dense_mlp(v1::BF16);
  workload.set_kv_cache_dtype(v1::KV_FP8_E4M3);
  WriteDimensions(id, workload, v1::TrialConfig());
  EXPECT_EQ(Row("trial_dimensions", kFormats),
            "attention=NVFP4 dense_mlp=BF16 KV_FP8_E4M3");
  Exec(
      "UPDATE trials SET quantization = NULL, "
      "kv_cache_dtype = NULL");
  EXPECT_EQ(Row("trial_dimensions", kFormats), "default KV_BF16");
}

// The attention beside tp and ep: 'tp' for unset and ATTENTION_TP, 'dp'
// for data-parallel attention, and 'tp' for rows from before version 6
// (NULL).
TEST_F(TrialDimensionsTest, AttentionIsShownBesideTheLayout) {
  constexpr char kLayout[] = "tp || ' ' || ep || ' ' || attention";
  const int64_t id = AddTrial();
  EXPECT_EQ(Row("trial_dimensions", kLayout), "2 4 tp");
  store_.reset();  // the writes below are this test's own
  v1::TrialConfig config;
  config.set_tp(2);
  config.set_ep(4);
  config.set_attention_split(v1::ATTENTION_DP);
  WriteDimensions(id, v1::Workload(), config);
  EXPECT_EQ(Row("trial_dimensions", kLayout), "2 4 dp");
  config.set_attention_split(v1::ATTENTION_TP);
  WriteDimensions(id, v1::Workload(), config);
  EXPECT_EQ(Row("trial_dimensions", kLayout), "2 4 tp");
  Exec("UPDATE trials SET attention = NULL");
  EXPECT_EQ(Row("trial_dimensions", kLayout), "2 4 tp");
}

// A tile's ring depth (TileShape.stages) in the tile text and its own
// column; none (0, or NULL for rows from before version 7) adds no 's' part.
TEST_F(TrialDimensionsTest, TileStagesAreShownInTheTile) {
  constexpr char kTile[] = "tile || ' ' || tile_stages";
  const int64_t id = AddTrial();
  EXPECT_EQ(Row("trial_dimensions", kTile), "8x128 0");
  store_.reset();  // the writes below are this test's own
  v1::TrialConfig config;
  config.mutable_tile()->set_block_n(128);
  config.mutable_tile()->set_block_k(256);
  config.mutable_tile()->set_stages(4);
  WriteDimensions(id, v1::Workload(), config);
  EXPECT_EQ(Row("trial_dimensions", kTile), "128x256s4 4");
  Exec("UPDATE trials SET tile_stages = NULL");
  EXPECT_EQ(Row("trial_dimensions", kTile), "128x256 0");
}

// A database at schema version 5 (no attention column; its rows'
// dimensions filled) opens with the store: it is migrated, its trial reads
// back whole, and the views show the trial as tp attention, the only one a
// version-5 row can hold.
TEST(TrialDimensionsOldSchemaTest, AVersion5DatabaseOpensAndReadsAsTp) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("trial_dims_v5_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "v5.db").string();
  v1::Trial trial = MakeTrial("cpu_blocked", "w5", 4);
  trial.mutable_config()->set_tp(2);
  {
    absl::StatusOr<Connection> conn = Connection::Open(path);
    ASSERT_TRUE(conn.ok()) << conn.status();
    ASSERT_EQ(*Migrate(*conn, ShippedMigrations().first(5)), 5);
    ASSERT_TRUE(conn->Execute("INSERT INTO sweeps (name, spec, state, "
                              "created_at) VALUES ('old', ?, 1, 0)",
                              BlobRef{MakeSpec("old").SerializeAsString()})
                    .ok());
    ASSERT_TRUE(
        conn->Execute("INSERT INTO trials (sweep_id, state, attempt, "
                      "moe_backend, workload_hash, workload, config, "
                      "measurement, updated_at, model_preset, region, "
                      "batch_size, context_length, chain_layers, tile_n, "
                      "tile_k, tp, ep, cuda_graph, quantization, "
                      "kv_cache_dtype) VALUES (1, 1, 0, 'cpu_blocked', "
                      "'w5', ?, ?, ?, 0, 'tiny', 1, 4, 0, 0, 0, 0, 2, 1, 0, "
                      "'', 'KV_BF16')",
                      BlobRef{trial.workload().SerializeAsString()},
                      BlobRef{trial.config().SerializeAsString()},
                      BlobRef{v1::Measurement().SerializeAsString()})
            .ok());
  }
  {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<v1::Trial> read = (*store)->GetTrial(1);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->config().tp(), 2);
    EXPECT_EQ(read->config().attention_split(),
              v1::ATTENTION_SPLIT_UNSPECIFIED);
  }
  absl::StatusOr<Connection> conn = Connection::Open(path, true);
  ASSERT_TRUE(conn.ok());
  EXPECT_EQ(*ReadUserVersion(*conn), LatestMigrationVersion());
  EXPECT_EQ(*conn->QueryText("SELECT backend || ' ' || batch || ' ' || tp || "
                             "' ' || attention FROM trial_dimensions"),
            "cpu_blocked 4 2 tp");
  std::filesystem::remove_all(dir);
}

TEST_F(TrialDimensionsTest, RowsFromBeforeVersion4AreFilledOnOpen) {
  AddTrial();
  store_.reset();
  Exec(
      "UPDATE trials SET batch_size = NULL, tp = NULL, "
      "tile_n = NULL");
  absl::StatusOr<std::unique_ptr<Store>> reopened = Store::Open(path_);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  store_ = *std::move(reopened);
  EXPECT_EQ(Row("trial_dimensions", kDims),
            "fused_gemv 16 2048 8x128 2 4 1 MOE_LAYER QUEUED");
}

}  // namespace
}  // namespace moetune::db
