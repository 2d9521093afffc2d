#include "coordinator/cli/winners_file.h"

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace moetune::cli {
namespace {

using ::testing::HasSubstr;

v1::BestForWorkload* AddWinner(v1::GetBestResponse& best, int batch,
                               int context, const std::string& backend) {
  v1::BestForWorkload* w = best.add_workloads();
  w->mutable_workload()->set_model_preset("glm5");
  w->mutable_workload()->set_batch_size(batch);
  w->mutable_workload()->set_context_length(context);
  w->mutable_fingerprint()->set_device_name("NVIDIA H200");
  v1::Trial* t = w->mutable_best();
  t->set_trial_id(batch * 10);
  t->mutable_config()->set_moe_backend(backend);
  t->mutable_config()->mutable_tile()->set_block_n(16);
  t->mutable_config()->mutable_tile()->set_block_k(512);
  t->mutable_config()->set_tp(1);
  t->mutable_config()->set_ep(1);
  t->mutable_config()->set_cuda_graph(true);
  t->mutable_result()->mutable_stats()->set_median_us(batch * 40.0);
  return w;
}

// A launcher reads it like vLLM's tuned configs: keys are batch sizes.
TEST(WinnersFileTest, OneEntryPerBatchSizeKeyedByTheBatch) {
  v1::GetBestResponse best;
  AddWinner(best, 1, 4096, "fused_gemv_fp8");
  AddWinner(best, 8, 4096, "fused_gemv")
      ->mutable_best()
      ->mutable_config()
      ->set_attention_split(v1::ATTENTION_DP);
  const absl::StatusOr<std::string> json = WinnersJson(best, 0);
  ASSERT_TRUE(json.ok()) << json.status();
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &parsed).ok());
  ASSERT_EQ(parsed.fields().size(), 2u);
  const auto& one = parsed.fields().at("1").struct_value().fields();
  EXPECT_EQ(one.at("moe_backend").string_value(), "fused_gemv_fp8");
  EXPECT_EQ(one.at("block_n").number_value(), 16);
  EXPECT_EQ(one.at("block_k").number_value(), 512);
  EXPECT_TRUE(one.at("cuda_graph").bool_value());
  EXPECT_EQ(one.at("median_us").number_value(), 40);
  EXPECT_EQ(one.at("trial_id").number_value(), 10);
  EXPECT_EQ(one.at("attention").string_value(), "tp");  // unset
  const auto& eight = parsed.fields().at("8").struct_value().fields();
  EXPECT_EQ(eight.at("moe_backend").string_value(), "fused_gemv");
  // A launcher needs the layout: data-parallel attention is another one.
  EXPECT_EQ(eight.at("attention").string_value(), "dp");
}

TEST(WinnersFileTest, TwoWinnersForABatchAskForAChoice) {
  v1::GetBestResponse best;
  AddWinner(best, 1, 2048, "a");
  AddWinner(best, 1, 4096, "b");
  const auto both = WinnersJson(best, 0);
  EXPECT_EQ(both.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(both.status().message()), HasSubstr("--context"));
  const auto chosen = WinnersJson(best, 4096);
  ASSERT_TRUE(chosen.ok());
  EXPECT_THAT(*chosen, HasSubstr("\"b\""));
  EXPECT_EQ(WinnersJson(best, 512).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(WinnersJson(v1::GetBestResponse(), 0).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace moetune::cli
