// Test helper shared by the reference-kernel tests: a StepSpec of a named
// model preset running all its layers with a given weight seed; each test
// sets its own batch, context and routing on top. Test-only.
#pragma once

#include <cstdint>

#include "gtest/gtest.h"
#include "kernels/model/model_config.h"
#include "kernels/reference/step_spec.h"

namespace moetune::ref::testing {

inline StepSpec PresetSpec(const char* preset, uint64_t seed) {
  StepSpec spec;
  absl::StatusOr<model::ModelConfig> config = model::PresetByName(preset);
  EXPECT_TRUE(config.ok()) << config.status();
  spec.config = *config;
  spec.layers = spec.config.num_layers;
  spec.seed = seed;
  return spec;
}

}  // namespace moetune::ref::testing
