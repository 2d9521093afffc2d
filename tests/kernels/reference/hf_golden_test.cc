// The reference decode step against Hugging Face transformers' GlmMoeDsa
// (tests/data/hf_glm_moe_dsa_golden.json, made by tests/golden/hf_golden.py
// from the reference's own weights and caches): per case, the logits, every
// layer's output and MLP output within a relative L2 of 1e-5 (float32), the
// same argmax, and the same indexer kept sets up to ties. Where
// transformers breaks an indexer tie the other way (torch.topk leaves tied
// order unspecified; the reference keeps the lower index), the reference is
// re-run attending to transformers' kept set, so the numbers are compared on
// the same tokens. No torch needed.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "kernels/reference/decode_step.h"
#include "tests/golden/golden_cases.h"

namespace moetune::ref {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

constexpr double kRelL2Bound = 1e-5;
// Scores this close to the boundary score are a tie: both implementations
// compute them in float32 from the same inputs.
constexpr double kTieTolerance = 1e-6;

Struct LoadGolden() {
  std::ifstream in(MOETUNE_SOURCE_DIR "/tests/data/hf_glm_moe_dsa_golden.json");
  std::stringstream text;
  text << in.rdbuf();
  Struct golden;
  const auto status =
      google::protobuf::util::JsonStringToMessage(text.str(), &golden);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return golden;
}

const Value& Field(const Struct& s, const std::string& name) {
  static const Value* empty = new Value();
  auto it = s.fields().find(name);
  return it == s.fields().end() ? *empty : it->second;
}

std::vector<float> Floats(const Value& base64) {
  std::string bytes;
  EXPECT_TRUE(absl::Base64Unescape(base64.string_value(), &bytes));
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

double RelL2(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
    norm += double{want[i]} * want[i];
  }
  return std::sqrt(diff / norm);
}

golden::GoldenCase CaseOf(const Struct& c) {
  golden::GoldenCase gc;
  gc.seed = static_cast<uint64_t>(Field(c, "seed").number_value());
  gc.batch = static_cast<int>(Field(c, "batch").number_value());
  gc.context = static_cast<int>(Field(c, "context").number_value());
  gc.skewed = Field(c, "routing").string_value() == "skewed";
  gc.skew = Field(c, "skew").number_value();
  return gc;
}

std::vector<int> Ints(const Value& list) {
  std::vector<int> out;
  for (const Value& v : list.list_value().values()) {
    out.push_back(static_cast<int>(v.number_value()));
  }
  return out;
}

// The k-th highest score: where the kept set's boundary lies.
float BoundaryScore(std::vector<float> scores, int k) {
  if (static_cast<int>(scores.size()) <= k) return -INFINITY;
  std::nth_element(scores.begin(), scores.begin() + (k - 1), scores.end(),
                   std::greater<float>());
  return scores[k - 1];
}

// True when `theirs` differs from `ours` only in tokens whose score ties the
// boundary; *ties counts them.
bool SameUpToTies(const std::vector<int>& ours, const std::vector<int>& theirs,
                  const std::vector<float>& scores, int k, int* ties) {
  if (ours.size() != theirs.size()) return false;
  const float boundary = BoundaryScore(scores, k);
  std::vector<int> differ;
  std::set_symmetric_difference(ours.begin(), ours.end(), theirs.begin(),
                                theirs.end(), std::back_inserter(differ));
  for (int t : differ) {
    if (t < 0 || t >= static_cast<int>(scores.size())) return false;
    const double gap = std::fabs(double{scores[t]} - boundary);
    if (gap > kTieTolerance * std::max(1.0, std::fabs(double{boundary})))
      return false;
  }
  *ties += static_cast<int>(differ.size());
  return true;
}

// The comparator itself: a kept set that differs only in tokens tied at the
// boundary (exact zeros, as ReLU makes them) is the same; any other
// difference is not.
TEST(SameUpToTiesTest, AcceptsTiesAtTheBoundaryOnly) {
  const std::vector<float> scores = {0.9f, 0.0f, 0.5f, 0.0f, -0.2f};
  int ties = 0;
  EXPECT_TRUE(SameUpToTies({0, 1, 2}, {0, 1, 2}, scores, 3, &ties));
  EXPECT_EQ(ties, 0);
  EXPECT_TRUE(SameUpToTies({0, 1, 2}, {0, 2, 3}, scores, 3, &ties));
  EXPECT_EQ(ties, 2);
  EXPECT_FALSE(SameUpToTies({0, 1, 2}, {0, 1, 4}, scores, 3, &ties));
  EXPECT_FALSE(SameUpToTies({0, 1, 2}, {1, 2, 3}, scores, 3, &ties));
  EXPECT_FALSE(SameUpToTies({0, 1, 2}, {0, 1}, scores, 3, &ties));
}

class HfGoldenTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { golden_ = new Struct(LoadGolden()); }
  static const Struct* golden_;
};
const Struct* HfGoldenTest::golden_ = nullptr;

TEST_F(HfGoldenTest, RecordsItsProvenanceAndEveryCase) {
  EXPECT_EQ(Field(*golden_, "transformers").string_value().substr(0, 4),
            "5.17");
  EXPECT_EQ(Field(*golden_, "dtype").string_value(), "float32");
  EXPECT_GE(Field(*golden_, "script_version").number_value(), 1);
  EXPECT_EQ(Field(*golden_, "cases").list_value().values_size(),
            static_cast<int>(golden::GoldenCases().size()));
}

// Layer by layer, the reference's kept sets against transformers': the same
// up to ties. Each layer is checked on a run that followed transformers'
// sets in the layers before it (a tie broken the other way changes what
// comes after). Returns transformers' sets and counts the ties.
std::vector<std::vector<std::vector<int>>> FollowKeptSets(const StepSpec& spec,
                                                          const Value& layers,
                                                          int* ties) {
  StepTrace trace;
  for (int l = 0; l < spec.layers; ++l) {
    const absl::StatusOr<std::vector<float>> run =
        DecodeStepTraced(spec, &trace);
    EXPECT_TRUE(run.ok()) << run.status();
    const Struct& layer = layers.list_value().values(l).struct_value();
    trace.forced_kept.emplace_back();
    for (int b = 0; b < spec.batch; ++b) {
      const std::vector<int> kept =
          Ints(Field(layer, "kept").list_value().values(b));
      EXPECT_TRUE(SameUpToTies(trace.layers[l].kept[b], kept,
                               trace.layers[l].index_scores[b],
                               spec.config.index_topk, ties))
          << "layer " << l << " sequence " << b;
      trace.forced_kept.back().push_back(kept);
    }
  }
  return trace.forced_kept;
}

void CheckNumbers(const StepSpec& spec, const std::vector<float>& logits,
                  const StepTrace& trace, const Struct& golden_case) {
  const std::vector<float> want = Floats(Field(golden_case, "logits"));
  EXPECT_LT(RelL2(logits, want), kRelL2Bound);
  const int vocab = spec.config.vocab;
  for (int b = 0; b < spec.batch; ++b) {
    auto row = [&](const std::vector<float>& v) {
      return std::max_element(v.begin() + b * vocab,
                              v.begin() + (b + 1) * vocab) -
             (v.begin() + b * vocab);
    };
    EXPECT_EQ(row(logits), row(want)) << "argmax of sequence " << b;
  }
  const Value& layers = Field(golden_case, "layers");
  for (int l = 0; l < spec.layers; ++l) {
    const Struct& layer = layers.list_value().values(l).struct_value();
    EXPECT_LT(RelL2(trace.layers[l].hidden, Floats(Field(layer, "hidden"))),
              kRelL2Bound)
        << "layer " << l;
    EXPECT_LT(RelL2(trace.layers[l].mlp_out, Floats(Field(layer, "mlp_out"))),
              kRelL2Bound)
        << "layer " << l << " MLP";
  }
}

TEST_F(HfGoldenTest, ReferenceComputesWhatTransformersComputes) {
  int ties = 0;
  for (const Value& entry : Field(*golden_, "cases").list_value().values()) {
    const Struct& golden_case = entry.struct_value();
    const StepSpec spec =
        CaseOf(Field(golden_case, "case").struct_value()).Spec();
    SCOPED_TRACE(Field(golden_case, "case").DebugString());
    StepTrace followed;
    followed.forced_kept =
        FollowKeptSets(spec, Field(golden_case, "layers"), &ties);
    const absl::StatusOr<std::vector<float>> logits =
        DecodeStepTraced(spec, &followed);
    ASSERT_TRUE(logits.ok()) << logits.status();
    CheckNumbers(spec, *logits, followed, golden_case);
  }
  RecordProperty("indexer_ties", ties);
}

}  // namespace
}  // namespace moetune::ref
