// Defaults, normalisation, canonical workloads and their hash, and the
// specs under deploy/.
#include "tuner/spec.h"

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/tuner/strategy_test_util.h"

namespace moetune::tuner {
namespace {

using testing::Parse;
using testing::TinyLayerSpec;

// ------------------------------------------------------------- defaults --

TEST(WithDefaultsTest, FillsEveryUnsetField) {
  v1::SweepSpec spec;
  spec.mutable_workload()->set_model_preset("tiny");
  const v1::SweepSpec d = WithDefaults(spec);
  EXPECT_EQ(d.measurement().warmup_iterations(), 3);
  EXPECT_EQ(d.measurement().iterations(), 20);
  EXPECT_EQ(d.measurement().trial_timeout_s(), 120.0);
  EXPECT_EQ(d.measurement().max_attempts(), 3);
  EXPECT_THAT(d.space().tp(), ::testing::ElementsAre(1));
  EXPECT_THAT(d.space().ep(), ::testing::ElementsAre(1));
  EXPECT_THAT(d.space().cuda_graph(), ::testing::ElementsAre(false));
  EXPECT_EQ(d.workload().routing().distribution(), v1::Routing::UNIFORM);
  EXPECT_EQ(d.workload().region(), v1::DECODE_STEP);
  EXPECT_EQ(d.strategy().kind(), v1::Strategy::GRID);
  EXPECT_EQ(d.workload().layers(), 4);  // 0 = all layers of tiny
}

TEST(WithDefaultsTest, KeepsWhatIsSet) {
  const v1::SweepSpec spec = Parse(R"pb(
    workload {
      model_preset: "glm5"
      layers: 2
      routing { distribution: SKEWED skew: 1.5 }
      region: MOE_LAYER
    }
    space { tp: 2 tp: 4 ep: 8 cuda_graph: true world_size: 8 }
    strategy { kind: GRID max_trials: 7 }
    measurement {
      warmup_iterations: 1
      iterations: 50
      trial_timeout_s: 30
      max_attempts: 1
    }
  )pb");
  const v1::SweepSpec d = WithDefaults(spec);
  EXPECT_EQ(d.workload().layers(), 2);
  EXPECT_EQ(d.workload().routing().skew(), 1.5);
  EXPECT_EQ(d.workload().region(), v1::MOE_LAYER);
  EXPECT_THAT(d.space().tp(), ::testing::ElementsAre(2, 4));
  EXPECT_THAT(d.space().ep(), ::testing::ElementsAre(8));
  EXPECT_THAT(d.space().cuda_graph(), ::testing::ElementsAre(true));
  EXPECT_EQ(d.strategy().max_trials(), 7);
  EXPECT_EQ(d.measurement().warmup_iterations(), 1);
  EXPECT_EQ(d.measurement().iterations(), 50);
  EXPECT_EQ(d.measurement().trial_timeout_s(), 30.0);
  EXPECT_EQ(d.measurement().max_attempts(), 1);
}

// The coordinator expands WithDefaults(spec): that must validate again and
// expand to the same trials, and defaulting twice must change nothing.
TEST(WithDefaultsTest, ValidIdempotentAndSameExpansion) {
  const v1::SweepSpec spec = Parse(R"pb(
    workload {
      model_preset: "tiny"
      batch_sizes: 2
      context_lengths: 64
      routing {
        distribution: REPLAYED
        histogram: [
          1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
          0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3
        ]
      }
    }
    space { moe_backends: "cpu_blocked" world_size: 1 }
  )pb");
  ASSERT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
  const v1::SweepSpec once = WithDefaults(spec);
  EXPECT_TRUE(ValidateSweepSpec(once).ok()) << ValidateSweepSpec(once);
  EXPECT_EQ(WithDefaults(once).SerializeAsString(), once.SerializeAsString());
  const absl::StatusOr<std::vector<v1::Trial>> a = testing::Expand(spec);
  const absl::StatusOr<std::vector<v1::Trial>> b = testing::Expand(once);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 1u);
  ASSERT_EQ(b->size(), 1u);
  EXPECT_EQ((*a)[0].SerializeAsString(), (*b)[0].SerializeAsString());
  EXPECT_EQ((*a)[0].workload().routing().histogram_size(), 32);
}

// --------------------------------------------------------- workload hash --

v1::Workload TinyWorkload() {
  v1::Workload w;
  w.set_model_preset("tiny");
  w.set_layers(4);
  w.set_batch_size(1);
  w.set_context_length(256);
  w.mutable_routing()->set_distribution(v1::Routing::UNIFORM);
  w.set_seed(42);
  w.set_region(v1::MOE_LAYER);
  return w;
}

TEST(WorkloadHashTest, GoldenValue) {
  // FNV-1a 64 over the hand-encoded bytes 0a0474696e79 1004 1801 208002
  // 2a020801 302a 3802, computed outside this code base. A change here means
  // stored workload hashes no longer match new ones.
  EXPECT_EQ(WorkloadHash(TinyWorkload()), "90d306c702e9773b");
  v1::Workload skewed = TinyWorkload();
  skewed.mutable_routing()->set_distribution(v1::Routing::SKEWED);
  skewed.mutable_routing()->set_skew(1.5);
  EXPECT_EQ(WorkloadHash(skewed), "5763b4a7b6da21e5");
}

TEST(WorkloadHashTest, StableAndIndependentOfSetOrder) {
  v1::Workload w;  // same fields as TinyWorkload, set in another order
  w.set_region(v1::MOE_LAYER);
  w.set_seed(42);
  w.mutable_routing()->set_distribution(v1::Routing::UNIFORM);
  w.set_context_length(256);
  w.set_batch_size(1);
  w.set_layers(4);
  w.set_model_preset("tiny");
  EXPECT_EQ(WorkloadHash(w), WorkloadHash(TinyWorkload()));
  EXPECT_EQ(WorkloadHash(w), WorkloadHash(w));
  EXPECT_EQ(WorkloadHash(w).size(), 16u);
  EXPECT_EQ(WorkloadHash(w).find_first_not_of("0123456789abcdef"),
            std::string::npos);
}

TEST(WorkloadHashTest, SensitiveToEveryField) {
  std::vector<v1::Workload> variants(11, TinyWorkload());
  variants[1].set_model_preset("glm5");
  variants[2].set_layers(3);
  variants[3].set_batch_size(2);
  variants[4].set_context_length(512);
  variants[5].mutable_routing()->set_distribution(v1::Routing::SKEWED);
  variants[5].mutable_routing()->set_skew(1.0);
  variants[6] = variants[5];
  variants[6].mutable_routing()->set_skew(2.0);
  variants[7].mutable_routing()->set_distribution(v1::Routing::REPLAYED);
  variants[7].mutable_routing()->add_histogram(1.0);
  variants[8].set_seed(43);
  variants[9].set_region(v1::DECODE_STEP);
  variants[10].set_chain_layers(4);
  std::set<std::string> hashes;
  for (const v1::Workload& w : variants) hashes.insert(WorkloadHash(w));
  EXPECT_EQ(hashes.size(), variants.size());
  v1::Workload other_histogram = variants[7];
  other_histogram.mutable_routing()->set_histogram(0, 2.0);
  EXPECT_NE(WorkloadHash(other_histogram), WorkloadHash(variants[7]));
}

TEST(WorkloadHashTest, EqualWorkHashesEqual) {
  const std::string base = WorkloadHash(TinyWorkload());
  v1::Workload all_layers = TinyWorkload();
  all_layers.set_layers(0);  // 0 = all = 4 for tiny
  EXPECT_EQ(WorkloadHash(all_layers), base);
  v1::Workload unspecified = TinyWorkload();
  unspecified.mutable_routing()->set_distribution(
      v1::Routing::DISTRIBUTION_UNSPECIFIED);
  EXPECT_EQ(WorkloadHash(unspecified), base);
  v1::Workload stray_skew = TinyWorkload();
  stray_skew.mutable_routing()->set_skew(3.0);  // UNIFORM ignores it
  EXPECT_EQ(WorkloadHash(stray_skew), base);
  v1::Workload decode = TinyWorkload();
  decode.set_region(v1::DECODE_STEP);
  v1::Workload decode_default = TinyWorkload();
  decode_default.set_region(v1::REGION_UNSPECIFIED);
  EXPECT_EQ(WorkloadHash(decode), WorkloadHash(decode_default));
  v1::Workload chain_of_one = TinyWorkload();
  chain_of_one.set_chain_layers(1);  // = 0: one layer
  EXPECT_EQ(WorkloadHash(chain_of_one), base);
}

// The workload options at their defaults, explicit or unset, hash as a
// workload without them: the golden hash holds; a non-default value changes
// it.
TEST(WorkloadHashTest, QuantizationAndKvDefaultsKeepTheHash) {
  const std::string base = WorkloadHash(TinyWorkload());
  EXPECT_EQ(base, "90d306c702e9773b");
  v1::Workload explicit_defaults = TinyWorkload();
  v1::QuantizationMap& q = *explicit_defaults.mutable_quantization();
  q.set_attention(v1::BF16);
  q.set_dense_mlp(v1::NVFP4);
  q.set_lm_head(v1::BF16);
  q.set_routed_experts(v1::NVFP4);
  q.set_shared_expert(v1::NVFP4);
  explicit_defaults.set_kv_cache_dtype(v1::KV_BF16);
  EXPECT_EQ(WorkloadHash(explicit_defaults), base);
  EXPECT_FALSE(CanonicalWorkload(explicit_defaults).has_quantization());
  EXPECT_EQ(CanonicalWorkload(explicit_defaults).kv_cache_dtype(),
            v1::KV_CACHE_DTYPE_UNSPECIFIED);
  v1::Workload empty_map = TinyWorkload();
  empty_map.mutable_quantization();  // present but empty
  EXPECT_EQ(WorkloadHash(empty_map), base);

  std::vector<v1::Workload> variants(4, TinyWorkload());
  variants[0].mutable_quantization()->set_attention(v1::NVFP4);
  variants[1].mutable_quantization()->set_dense_mlp(v1::BF16);
  variants[2].mutable_quantization()->set_lm_head(v1::NVFP4);
  variants[3].set_kv_cache_dtype(v1::KV_FP8_E4M3);
  std::set<std::string> hashes = {base};
  for (const v1::Workload& w : variants) hashes.insert(WorkloadHash(w));
  EXPECT_EQ(hashes.size(), variants.size() + 1);
}

TEST(WithDefaultsTest, ClearsExplicitDefaultPrecisions) {
  v1::SweepSpec spec;
  v1::QuantizationMap& q = *spec.mutable_workload()->mutable_quantization();
  q.set_attention(v1::NVFP4);
  q.set_lm_head(v1::BF16);
  const v1::SweepSpec out = WithDefaults(spec);
  EXPECT_EQ(out.workload().quantization().attention(), v1::NVFP4);
  EXPECT_EQ(out.workload().quantization().lm_head(), v1::PRECISION_UNSPECIFIED);
  v1::SweepSpec all_default;
  all_default.mutable_workload()->mutable_quantization()->set_dense_mlp(
      v1::NVFP4);
  EXPECT_FALSE(WithDefaults(all_default).workload().has_quantization());
}

// ----------------------------------------------------------- the example --

v1::SweepSpec ReadDeploySpec(const std::string& name) {
  std::ifstream in(MOETUNE_SOURCE_DIR "/deploy/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream text;
  text << in.rdbuf();
  v1::SweepSpec spec;
  const auto parsed =
      google::protobuf::util::JsonStringToMessage(text.str(), &spec);
  EXPECT_TRUE(parsed.ok()) << name << ": " << parsed.ToString();
  return spec;
}

// The H200 specs scripts/gpu_session.sh runs: valid, and the chained one's
// trials all chain 8 layers.
TEST(DeploySpecsTest, H200SpecsValidateAndExpand) {
  for (const std::string name : {"h200_sweep.json", "h200_chain_sweep.json"}) {
    const v1::SweepSpec spec = ReadDeploySpec(name);
    ASSERT_TRUE(ValidateSweepSpec(spec).ok())
        << name << ": " << ValidateSweepSpec(spec);
    const std::vector<v1::Trial> trials = *testing::Expand(spec);
    EXPECT_GE(trials.size(), 12u) << name;
    for (const v1::Trial& t : trials) {
      EXPECT_EQ(t.workload().chain_layers(),
                name == "h200_chain_sweep.json" ? 8 : 0);
    }
  }
}

// The serving-batch specs (batches 1 to 512, uniform and skewed routing):
// valid, and each batch plans only the backends that take it
// (fused_gemv_fp8 stops at 1; fused_gemv_wgmma starts at 17).
TEST(DeploySpecsTest, ServingSpecsPlanTheLargeBatchesOnTheirBackends) {
  for (const std::string name :
       {"h200_serving_sweep.json", "h200_serving_skewed_sweep.json"}) {
    const v1::SweepSpec spec = ReadDeploySpec(name);
    ASSERT_TRUE(ValidateSweepSpec(spec).ok())
        << name << ": " << ValidateSweepSpec(spec);
    std::set<std::string> at_8, at_512;
    const std::vector<v1::Trial> trials = *testing::Expand(spec);
    for (const v1::Trial& t : trials) {
      if (t.workload().batch_size() == 8) at_8.insert(t.config().moe_backend());
      if (t.workload().batch_size() == 512)
        at_512.insert(t.config().moe_backend());
    }
    EXPECT_EQ(at_8, (std::set<std::string>{"fused_gemv", "grouped_mma",
                                           "grouped_wgmma"}))
        << name;
    EXPECT_EQ(at_512, (std::set<std::string>{"fused_gemv", "fused_gemv_wgmma",
                                             "grouped_mma", "grouped_wgmma"}))
        << name;
  }
}

// The GPU correctness check of whole tiny steps (docs/design.md §3): valid,
// every trial a 4-layer DECODE_STEP with NVFP4 attention, the CPU
// reference's oracle; 40 trials (dequant_cublas is not graph-capturable).
TEST(DeploySpecsTest, GpuTinyStepCheckPlansEveryBatchAndContext) {
  const v1::SweepSpec spec = ReadDeploySpec("gpu_tiny_step_check.json");
  ASSERT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
  const absl::StatusOr<std::vector<v1::Trial>> trials = testing::Expand(spec);
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_EQ(trials->size(), 40u);
  for (const v1::Trial& t : *trials) {
    EXPECT_EQ(t.workload().region(), v1::DECODE_STEP);
    EXPECT_EQ(t.workload().layers(), 4);
    EXPECT_EQ(t.workload().quantization().attention(), v1::NVFP4);
  }
}

// The ring-depth spec (pipeline depth in the tuner's space): every batch
// plans grouped_wgmma at each of its six tiles, its depths included, and
// fused_gemv_wgmma at 16x512.
TEST(DeploySpecsTest, StagesSpecPlansEveryRingDepth) {
  const v1::SweepSpec spec = ReadDeploySpec("h200_serving_stages_sweep.json");
  ASSERT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
  const absl::StatusOr<std::vector<v1::Trial>> trials = testing::Expand(spec);
  ASSERT_TRUE(trials.ok()) << trials.status();
  std::set<std::string> at_256;
  for (const v1::Trial& t : *trials) {
    if (t.workload().batch_size() != 256) continue;
    at_256.insert(t.config().moe_backend() + " " + TileText(t.config()));
  }
  EXPECT_EQ(at_256, (std::set<std::string>{
                        "fused_gemv_wgmma 16x512", "grouped_wgmma 128x256",
                        "grouped_wgmma 128x128", "grouped_wgmma 256x256",
                        "grouped_wgmma 128x256s2", "grouped_wgmma 128x128s4",
                        "grouped_wgmma 128x256s6"}));
}

// The decode-step specs of the gang and dp sweeps: valid; the dp sweep
// plans tp and dp attention for each world-8 layout; the 8-GPU gang sweep
// plans every trial MEASURED over 8 ranks, the four layouts of world 8
// (TP8, EP8, TP4 x EP2, TP2 x EP4) with both all-reduces, and dp attention
// only at the batches that split over 8 ranks.
TEST(DeploySpecsTest, StepGangSpecsPlanTheirLayouts) {
  const v1::SweepSpec dp = ReadDeploySpec("h200_dp_sweep.json");
  ASSERT_TRUE(ValidateSweepSpec(dp).ok()) << ValidateSweepSpec(dp);
  int dp_trials = 0;
  const std::vector<v1::Trial> dp_plan = *testing::Expand(dp);
  for (const v1::Trial& t : dp_plan) {
    dp_trials += t.config().attention_split() == v1::ATTENTION_DP;
  }
  EXPECT_GT(dp_trials, 0);
  const v1::SweepSpec gang = ReadDeploySpec("h200x8_gang_sweep.json");
  ASSERT_TRUE(ValidateSweepSpec(gang).ok()) << ValidateSweepSpec(gang);
  std::set<std::pair<int, int>> layouts;
  std::set<int> impls;
  const std::vector<v1::Trial> gang_plan = *testing::Expand(gang);
  for (const v1::Trial& t : gang_plan) {
    EXPECT_EQ(t.config().communication(), v1::MEASURED);
    EXPECT_EQ(t.config().tp() * t.config().ep(), 8);
    layouts.insert({t.config().tp(), t.config().ep()});
    impls.insert(t.config().all_reduce_impl());
    if (t.config().attention_split() == v1::ATTENTION_DP) {
      EXPECT_EQ(t.workload().batch_size() % 8, 0);
    }
  }
  EXPECT_EQ(layouts,
            (std::set<std::pair<int, int>>{{8, 1}, {4, 2}, {2, 4}, {1, 8}}));
  EXPECT_EQ(impls,
            (std::set<int>{v1::ALL_REDUCE_NCCL, v1::ALL_REDUCE_ONESHOT}));
}

// The scheduled sweep (deploy/moetune-sweep.service installs
// nightly_sweep.json; deploy/kubernetes.yaml carries the same spec in its
// ConfigMap): valid, and the two copies say the same.
TEST(DeploySpecsTest, NightlySpecValidatesAndTheConfigMapCarriesIt) {
  const v1::SweepSpec spec = ReadDeploySpec("nightly_sweep.json");
  ASSERT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
  EXPECT_GE(testing::Expand(spec)->size(), 6u);
  // The ConfigMap's block: the lines after "sweep.json: |", indented.
  std::ifstream in(MOETUNE_SOURCE_DIR "/deploy/kubernetes.yaml");
  std::string line, block;
  bool inside = false;
  while (std::getline(in, line)) {
    if (inside && line.rfind("    ", 0) != 0) break;
    if (inside) block += line + "\n";
    if (line.find("sweep.json: |") != std::string::npos) inside = true;
  }
  v1::SweepSpec from_config_map;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(block, &from_config_map).ok())
      << block;
  EXPECT_EQ(from_config_map.SerializeAsString(), spec.SerializeAsString());
  EXPECT_EQ(spec.name(), "glm5-moe-layer-h200-nightly");
}

TEST(ExampleSweepTest, ParsesValidatesAndExpands) {
  const v1::SweepSpec spec = ReadDeploySpec("example_sweep.json");
  EXPECT_EQ(spec.workload().model_preset(), "tiny");
  EXPECT_EQ(spec.workload().seed(), 42u);
  ASSERT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
  const std::vector<v1::Trial> trials = *testing::Expand(spec);
  // The quick start promises at least 8 trials on the small preset, every
  // listed backend present (so unavailable ones show with their reason), and
  // only tiles that fit tiny's dims (hidden 256, moe_intermediate 128).
  EXPECT_GE(trials.size(), 8u);
  std::set<std::string> backends;
  for (const v1::Trial& trial : trials) {
    backends.insert(trial.config().moe_backend());
    const int block_k = trial.config().tile().block_k();
    if (block_k > 0) {
      EXPECT_EQ(256 % block_k, 0) << trial.ShortDebugString();
    }
  }
  for (const std::string& backend : spec.space().moe_backends()) {
    EXPECT_TRUE(backends.count(backend)) << backend;
  }
  EXPECT_GT(trials.front().measurement().iterations(), 0);
}

// The H200 formats sweep: all-NVFP4 attention and lm_head, each KV dtype
// its own workload (2 batches x 2 contexts x 2 dtypes), the map on every
// trial.
TEST(DeploySpecsTest, H200FormatsSpecExpandsEachKvDtype) {
  const v1::SweepSpec spec = ReadDeploySpec("h200_step_formats_sweep.json");
  ASSERT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
  const std::vector<v1::Trial> trials = *testing::Expand(spec);
  ASSERT_EQ(trials.size(), 8u);
  std::set<std::string> hashes;
  int fp8 = 0;
  for (const v1::Trial& t : trials) {
    EXPECT_EQ(t.workload().quantization().attention(), v1::NVFP4);
    EXPECT_EQ(t.workload().quantization().lm_head(), v1::NVFP4);
    fp8 += t.workload().kv_cache_dtype() == v1::KV_FP8_E4M3;
    hashes.insert(t.workload_hash());
  }
  EXPECT_EQ(fp8, 4);
  EXPECT_EQ(hashes.size(), 8u);
}

}  // namespace
}  // namespace moetune::tuner
