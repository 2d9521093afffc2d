#include <sstream>

#include "coordinator/cli/best_view.h"
#include "coordinator/cli/spec_file.h"
#include "coordinator/cli/table.h"
#include "coordinator/cli/views.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune::cli {
namespace {

using ::testing::HasSubstr;

TEST(TableTest, AlignsColumnsAndEscapesCsv) {
  Table table;
  table.headers = {"a", "bb"};
  table.rows = {{"xyz", "1"}, {"q", "has,comma \"quoted\""}};
  std::ostringstream text;
  table.Print(text, OutputFormat::kTable);
  EXPECT_EQ(text.str(), "a    bb\nxyz  1\nq    has,comma \"quoted\"\n");
  std::ostringstream csv;
  table.Print(csv, OutputFormat::kCsv);
  EXPECT_EQ(csv.str(), "a,bb\nxyz,1\nq,\"has,comma \"\"quoted\"\"\"\n");
}

// Names stored before they were bounded print escaped, never as terminal
// control sequences; CSV keeps the data as it is.
TEST(TableTest, ControlCharactersPrintEscaped) {
  Table table;
  table.headers = {"name"};
  table.rows = {{"x\x1b[2Jy \xe2\x80\xae"}};
  std::ostringstream text;
  table.Print(text, OutputFormat::kTable);
  EXPECT_EQ(text.str(), "name\nx\\x1B[2Jy \\u202E\n");
  std::ostringstream csv;
  table.Print(csv, OutputFormat::kCsv);
  EXPECT_EQ(csv.str(), "name\nx\x1b[2Jy \xe2\x80\xae\n");
}

TEST(TableTest, ParsesFormats) {
  OutputFormat format;
  EXPECT_TRUE(ParseOutputFormat("csv", &format));
  EXPECT_EQ(format, OutputFormat::kCsv);
  EXPECT_FALSE(ParseOutputFormat("xml", &format));
}

TEST(SpecFileTest, ReadsJsonAndTextFormat) {
  auto json = ParseSweepSpec(
      R"({"name": "x", "workload": {"modelPreset": "tiny", "batchSizes": [1, 8]}})",
      false);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->workload().batch_sizes_size(), 2);
  auto text =
      ParseSweepSpec("name: 'y' space { moe_backends: 'cpu_blocked' }", true);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->space().moe_backends(0), "cpu_blocked");
}

// A listed tile a backend lacks is left out for it: said, with its tiles.
TEST(SpecFileTest, WarnsOfEachTileABackendLeavesOut) {
  auto spec = ParseSweepSpec(
      "space { moe_backends: ['cpu_reference', 'cpu_blocked', 'fused_gemv'] "
      "tiles { block_n: 4 block_k: 64 } tiles { block_n: 32 block_k: 256 } }",
      true);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::vector<std::string> warnings = DroppedTileWarnings(*spec);
  ASSERT_EQ(warnings.size(), 2);
  EXPECT_EQ(warnings[0],
            "space.tiles: 32x256 is not a tile of cpu_blocked (its tiles: "
            "4x64, 8x128, 16x256, 32x512): left out for it");
  EXPECT_THAT(warnings[1],
              ::testing::StartsWith("space.tiles: 4x64 is not a tile of "
                                    "fused_gemv (its tiles: "));
  spec->mutable_space()->mutable_tiles()->RemoveLast();
  EXPECT_THAT(DroppedTileWarnings(*spec)[0],
              HasSubstr("it runs its default tile for each shape instead"));
}

// protobuf's parser takes a trailing comma; a spec another tool would
// refuse is refused here too, naming where.
TEST(SpecFileTest, ATrailingCommaIsRefusedNamingWhere) {
  auto bad = ParseSweepSpec(
      "{\"name\": \"x\",\n \"workload\": {\"modelPreset\": "
      "\"tiny\",}}",
      false);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("line 2 column 37: expected a member after ','"));
}

TEST(SpecFileTest, UnknownFieldsAndMissingFilesAreNamed) {
  auto bad = ParseSweepSpec(R"({"workload": {"batchSize": 1}})", false);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("batchSize"));
  auto missing = LoadSweepSpec("/nonexistent/spec.json");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("--spec"));
}

TEST(ViewsTest, TrialRowsShowTimingOnlyWhenTimed) {
  v1::QueryTrialsResponse trials;
  v1::Trial* done = trials.add_trials();
  done->set_trial_id(1);
  done->set_state(v1::DONE);
  done->mutable_config()->set_moe_backend("cpu_blocked");
  done->mutable_config()->mutable_tile()->set_block_n(8);
  done->mutable_config()->mutable_tile()->set_block_k(128);
  done->mutable_result()->mutable_stats()->set_samples(3);
  done->mutable_result()->mutable_stats()->set_median_us(12.34);
  done->mutable_result()->mutable_roofline()->set_efficiency(0.5);
  v1::Trial* unavailable = trials.add_trials();
  unavailable->set_trial_id(2);
  unavailable->set_state(v1::UNAVAILABLE);
  unavailable->set_reason("no GPU");
  const Table table = TrialsTable(trials);
  ASSERT_EQ(table.rows.size(), 2u);
  EXPECT_EQ(table.rows[0][2], "8x128");
  EXPECT_EQ(table.rows[0][7], "12.3");
  EXPECT_EQ(table.rows[0][11], "50.0%");
  EXPECT_EQ(table.rows[0][12], "-");  // an MoE layer has no tokens/s
  EXPECT_EQ(table.rows[1][7], "-");
  EXPECT_EQ(table.rows[1].back(), "no GPU");
}

// A whole step: ms per token is its latency, tokens/s the batch's rate.
TEST(ViewsTest, DecodeStepsShowMsPerTokenAndTokensPerSecond) {
  v1::QueryTrialsResponse trials;
  v1::Trial* done = trials.add_trials();
  done->set_state(v1::DONE);
  done->mutable_workload()->set_region(v1::DECODE_STEP);
  done->mutable_workload()->set_batch_size(8);
  done->mutable_result()->mutable_stats()->set_samples(3);
  done->mutable_result()->mutable_stats()->set_median_us(4000);
  const Table table = TrialsTable(trials);
  EXPECT_EQ(table.headers[12], "ms_tok");
  EXPECT_EQ(table.rows[0][12], "4.000");
  EXPECT_EQ(table.rows[0][13], "2000");
}

// A rank of world 8 timed on one device: its median holds no communication,
// so the step a deployment runs takes the modelled communication on top.
TEST(ViewsTest, MsPerTokenAddsTheModelledCommunication) {
  v1::QueryTrialsResponse trials;
  v1::Trial* done = trials.add_trials();
  done->set_state(v1::DONE);
  done->mutable_workload()->set_region(v1::DECODE_STEP);
  done->mutable_workload()->set_batch_size(8);
  done->mutable_result()->mutable_stats()->set_samples(3);
  done->mutable_result()->mutable_stats()->set_median_us(3000);
  done->mutable_result()->mutable_roofline()->set_comm_floor_us(1000);
  done->mutable_result()->mutable_roofline()->set_comm_modelled(true);
  const Table table = TrialsTable(trials);
  EXPECT_EQ(table.rows[0][12], "4.000");
  EXPECT_EQ(table.rows[0][13], "2000");
  done->mutable_result()->mutable_roofline()->set_comm_modelled(false);
  EXPECT_EQ(TrialsTable(trials).rows[0][12], "3.000");  // measured: in it
}

// A best-of workload "abc": glm5, batch 1, context 2048.
v1::BestForWorkload* AddGlm5Workload(v1::GetBestResponse* best) {
  v1::BestForWorkload* w = best->add_workloads();
  w->set_workload_hash("abc");
  w->mutable_workload()->set_model_preset("glm5");
  w->mutable_workload()->set_batch_size(1);
  w->mutable_workload()->set_context_length(2048);
  return w;
}

TEST(ViewsTest, BestSaysWhenFiguresArePerLayerOfAChain) {
  v1::GetBestResponse best;
  v1::BestForWorkload* w = AddGlm5Workload(&best);
  std::ostringstream alone;
  PrintBest(alone, best);
  EXPECT_THAT(alone.str(),
              ::testing::StartsWith("workload abc (glm5, batch 1, context "
                                    "2048) on "));
  w->mutable_workload()->set_chain_layers(8);
  std::ostringstream chained;
  PrintBest(chained, best);
  EXPECT_THAT(chained.str(),
              ::testing::StartsWith("workload abc (glm5, batch 1, context "
                                    "2048, 8 layers chained: figures per "
                                    "layer) on "));
}

TEST(ViewsTest, BestNamesAStepsFormatsWhenNotTheDefault) {
  v1::GetBestResponse best;
  v1::BestForWorkload* w = AddGlm5Workload(&best);
  w->mutable_workload()->mutable_quantization()->set_attention(v1::NVFP4);
  w->mutable_workload()->mutable_quantization()->set_lm_head(v1::NVFP4);
  w->mutable_workload()->set_kv_cache_dtype(v1::KV_FP8_E4M3);
  std::ostringstream out;
  PrintBest(out, best);
  EXPECT_THAT(
      out.str(),
      ::testing::StartsWith("workload abc (glm5, batch 1, context 2048, "
                            "attention=NVFP4 lm_head=NVFP4, KV_FP8_E4M3) on "));
}

// Exclusions hold for the whole sweep: said once, above every workload,
// not under the last one as if they were its own.
TEST(ViewsTest, BestSaysExclusionsOnceAboveTheWorkloads) {
  v1::GetBestResponse best;
  AddGlm5Workload(&best);
  AddGlm5Workload(&best)->set_workload_hash("def");
  v1::ExcludedBackend* excluded = best.add_excluded();
  excluded->set_backend("fused_gemv");
  excluded->set_reason("built without CUDA");
  std::ostringstream out;
  PrintBest(out, best);
  EXPECT_THAT(out.str(),
              ::testing::StartsWith("excluded, for every workload below:\n"
                                    "  fused_gemv: built without CUDA\n"
                                    "workload abc "));
  EXPECT_EQ(out.str().find("fused_gemv"), out.str().rfind("fused_gemv"));
}

// A gang's result: its measured communication beside the model's figure,
// with the model's error; none for a modelled result.
TEST(ViewsTest, BestShowsMeasuredCommunicationAndTheModelsError) {
  v1::GetBestResponse best;
  v1::BestForWorkload* w = best.add_workloads();
  w->set_workload_hash("abc");
  v1::Roofline* roofline =
      w->mutable_best()->mutable_result()->mutable_roofline();
  roofline->set_comm_measured_us(50);
  roofline->set_comm_model_us(40);
  std::ostringstream measured;
  PrintBest(measured, best);
  EXPECT_THAT(measured.str(),
              ::testing::HasSubstr(", communication measured 50.0 us a step "
                                   "(model 40.0 us: -20%)"));
  roofline->set_comm_model_us(0);
  std::ostringstream unmodelled;
  PrintBest(unmodelled, best);
  EXPECT_THAT(
      unmodelled.str(),
      ::testing::HasSubstr("measured 50.0 us a step (no model figure)"));
  roofline->set_comm_modelled(true);
  std::ostringstream modelled;
  PrintBest(modelled, best);
  EXPECT_THAT(modelled.str(),
              ::testing::Not(::testing::HasSubstr("communication measured")));
}

}  // namespace
}  // namespace moetune::cli
