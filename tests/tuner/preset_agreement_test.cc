// The tuner keeps its own small preset table (tuner/spec.cc) so that it does
// not depend on the reference library; this checks the two agree.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/model_config.h"
#include "tuner/spec.h"

namespace moetune::tuner {
namespace {

TEST(PresetAgreementTest, SameNamesLayersExpertsAndDims) {
  const std::vector<std::string> names = model::PresetNames();
  std::string joined;
  for (const std::string& name : names) {
    if (!joined.empty()) joined += ", ";
    joined += name;
  }
  EXPECT_EQ(joined, KnownPresetNames());
  for (const std::string& name : names) {
    const absl::StatusOr<model::ModelConfig> config = model::PresetByName(name);
    ASSERT_TRUE(config.ok()) << config.status();
    const PresetInfo* info = FindPreset(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->num_layers, config->num_layers) << name;
    EXPECT_EQ(info->num_experts, config->num_experts) << name;
    // The dims the tuner's space is filtered by (which tiles can run).
    EXPECT_EQ(info->hidden, config->hidden) << name;
    EXPECT_EQ(info->moe_intermediate, config->moe_intermediate) << name;
  }
}

}  // namespace
}  // namespace moetune::tuner
