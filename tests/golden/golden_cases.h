// The decode steps compared with Hugging Face's GlmMoeDsa: the tiny preset
// (every layer), contexts below, at and above its index_topk (16: 8, 15,
// 40), batch 1 and 4, uniform and skewed routing. Shared by the exporter
// (tests/golden/export_main.cc) and the CI test that replays the golden
// data (tests/kernels/reference/hf_golden_test.cc). Plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/model/model_config.h"
#include "kernels/reference/step_spec.h"

namespace moetune::golden {

struct GoldenCase {
  uint64_t seed = 7;
  int batch = 1;
  int context = 8;
  bool skewed = false;
  double skew = 1.2;  // Zipf exponent when skewed

  ref::StepSpec Spec() const {
    ref::StepSpec spec;
    spec.config = *model::FindPreset("tiny");
    spec.layers = spec.config.num_layers;
    spec.batch = batch;
    spec.context = context;
    spec.seed = seed;
    if (skewed) {
      spec.routing.kind = ref::RoutingSpec::Kind::kSkewed;
      spec.routing.skew = skew;
    }
    return spec;
  }

  std::string Json() const {
    return "{\"preset\":\"tiny\",\"seed\":" + std::to_string(seed) +
           ",\"batch\":" + std::to_string(batch) +
           ",\"context\":" + std::to_string(context) + ",\"routing\":\"" +
           (skewed ? "skewed" : "uniform") +
           "\",\"skew\":" + std::to_string(skewed ? skew : 0.0) + "}";
  }
};

inline std::vector<GoldenCase> GoldenCases() {
  std::vector<GoldenCase> cases;
  for (int context : {8, 15, 40}) {
    for (int batch : {1, 4}) {
      for (bool skewed : {false, true}) {
        GoldenCase c;
        c.context = context;
        c.batch = batch;
        c.skewed = skewed;
        cases.push_back(c);
      }
    }
  }
  return cases;
}

}  // namespace moetune::golden
