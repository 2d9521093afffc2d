#include "kernels/model/model_config.h"

#include "gtest/gtest.h"

namespace moetune::model {
namespace {

TEST(ModelConfigTest, Glm5HasTheRealDims) {
  absl::StatusOr<ModelConfig> c = PresetByName("glm5");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "glm5");
  EXPECT_EQ(c->hidden, 6144);
  EXPECT_EQ(c->num_layers, 78);
  EXPECT_EQ(c->num_dense_layers, 3);
  EXPECT_EQ(c->vocab, 154880);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c->latent_norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c->index_norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c->rope_theta, 1.0e6f);
  EXPECT_EQ(c->q_lora_rank, 2048);
  EXPECT_EQ(c->num_heads, 64);
  EXPECT_EQ(c->qk_nope_dim, 192);
  EXPECT_EQ(c->qk_rope_dim, 64);
  EXPECT_EQ(c->kv_lora_rank, 512);
  EXPECT_EQ(c->v_head_dim, 256);
  EXPECT_EQ(c->index_heads, 32);
  EXPECT_EQ(c->index_head_dim, 128);
  EXPECT_EQ(c->index_topk, 2048);
  EXPECT_EQ(c->num_experts, 256);
  EXPECT_EQ(c->experts_per_token, 8);
  EXPECT_EQ(c->num_shared_experts, 1);
  EXPECT_EQ(c->moe_intermediate, 2048);
  EXPECT_FLOAT_EQ(c->routed_scaling, 2.5f);
  EXPECT_EQ(c->dense_intermediate, 12288);
}

TEST(ModelConfigTest, TinyHasTheSameStructureSmall) {
  absl::StatusOr<ModelConfig> c = PresetByName("tiny");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "tiny");
  EXPECT_EQ(c->hidden, 256);
  EXPECT_EQ(c->num_layers, 4);
  EXPECT_EQ(c->num_dense_layers, 1);
  EXPECT_EQ(c->vocab, 512);
  EXPECT_EQ(c->q_lora_rank, 128);
  EXPECT_EQ(c->num_heads, 4);
  EXPECT_EQ(c->qk_nope_dim, 32);
  EXPECT_EQ(c->qk_rope_dim, 16);
  EXPECT_EQ(c->kv_lora_rank, 64);
  EXPECT_EQ(c->v_head_dim, 32);
  EXPECT_EQ(c->index_heads, 4);
  EXPECT_EQ(c->index_head_dim, 32);
  EXPECT_EQ(c->index_topk, 16);
  EXPECT_EQ(c->num_experts, 32);
  EXPECT_EQ(c->experts_per_token, 8);
  EXPECT_EQ(c->num_shared_experts, 1);
  EXPECT_EQ(c->moe_intermediate, 128);
  EXPECT_FLOAT_EQ(c->routed_scaling, 2.5f);
  EXPECT_EQ(c->dense_intermediate, 512);
}

TEST(ModelConfigTest, UnknownPresetNamesTheAllowedOnes) {
  absl::StatusOr<ModelConfig> c = PresetByName("x");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            "model_preset: unknown preset 'x'; allowed: glm5, tiny");
  EXPECT_EQ(PresetNames(), (std::vector<std::string>{"glm5", "tiny"}));
}

TEST(ModelConfigTest, FirstLayersAreDense) {
  const ModelConfig glm5 = *PresetByName("glm5");
  EXPECT_FALSE(IsMoeLayer(glm5, 0));
  EXPECT_FALSE(IsMoeLayer(glm5, 2));
  EXPECT_TRUE(IsMoeLayer(glm5, 3));
  EXPECT_TRUE(IsMoeLayer(glm5, 77));
  const ModelConfig tiny = *PresetByName("tiny");
  EXPECT_FALSE(IsMoeLayer(tiny, 0));
  EXPECT_TRUE(IsMoeLayer(tiny, 1));
}

// NVFP4 has one block scale per 16 K elements: every K dim must hold whole
// blocks, and so must every TP slice of the expert intermediate dim that
// the sweeps use.
TEST(ModelConfigTest, EveryReductionDimIsAMultipleOf16) {
  for (const std::string& name : PresetNames()) {
    const ModelConfig c = *PresetByName(name);
    EXPECT_TRUE(ValidateModelConfig(c).ok()) << name;
    const auto dims = ReductionDims(c);
    ASSERT_EQ(dims.size(), 6u);
    for (const auto& [dim, value] : dims) {
      EXPECT_EQ(value % 16, 0) << name << "." << dim << " = " << value;
    }
  }
  const ModelConfig glm5 = *PresetByName("glm5");
  for (int tp : {1, 2, 4, 8}) {
    EXPECT_EQ(glm5.moe_intermediate / tp % 16, 0) << "tp " << tp;
  }
}

TEST(ModelConfigTest, ValidationNamesTheBadField) {
  ModelConfig c = *PresetByName("tiny");
  c.hidden = 100;
  absl::Status status = ValidateModelConfig(c);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("model.hidden"), std::string::npos) << status;
  c = *PresetByName("tiny");
  c.experts_per_token = 33;
  status = ValidateModelConfig(c);
  EXPECT_NE(status.message().find("model.experts_per_token"), std::string::npos)
      << status;
  c = *PresetByName("tiny");
  c.num_heads = 0;
  EXPECT_NE(ValidateModelConfig(c).message().find("model.num_heads"),
            std::string::npos);
}

}  // namespace
}  // namespace moetune::model
