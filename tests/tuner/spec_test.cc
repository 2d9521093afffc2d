// Defaults, canonical workloads and their hash, grid expansion, and the
// example spec under deploy/.
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

using testing::TinyLayerSpec;

v1::SweepSpec Parse(const std::string& text) {
  v1::SweepSpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec))
      << text;
  return spec;
}

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
  const absl::StatusOr<std::vector<v1::Trial>> a = ExpandSweep(spec);
  const absl::StatusOr<std::vector<v1::Trial>> b = ExpandSweep(once);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 1u);
  ASSERT_EQ(b->size(), 1u);
  EXPECT_EQ((*a)[0].SerializeAsString(), (*b)[0].SerializeAsString());
  EXPECT_EQ((*a)[0].workload().routing().histogram_size(), 32);
}

TEST(PresetTest, Table) {
  ASSERT_NE(FindPreset("glm5"), nullptr);
  EXPECT_EQ(FindPreset("glm5")->num_layers, 78);
  EXPECT_EQ(FindPreset("glm5")->num_experts, 256);
  ASSERT_NE(FindPreset("tiny"), nullptr);
  EXPECT_EQ(FindPreset("tiny")->num_layers, 4);
  EXPECT_EQ(FindPreset("tiny")->num_experts, 32);
  EXPECT_EQ(FindPreset("GLM5"), nullptr);
  EXPECT_EQ(KnownPresetNames(), "glm5, tiny");
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

// ------------------------------------------------------------- expansion --

// (backend, "NxK" or "-", tp, ep, cuda_graph) of each trial, in order.
using Row = std::tuple<std::string, std::string, int, int, bool>;
std::vector<Row> Rows(const std::vector<v1::Trial>& trials) {
  std::vector<Row> rows;
  for (const v1::Trial& t : trials) {
    const v1::TrialConfig& c = t.config();
    const std::string tile = c.has_tile()
                                 ? std::to_string(c.tile().block_n()) + "x" +
                                       std::to_string(c.tile().block_k())
                                 : "-";
    rows.emplace_back(c.moe_backend(), tile, c.tp(), c.ep(), c.cuda_graph());
  }
  return rows;
}

std::vector<v1::Trial> Expand(const v1::SweepSpec& spec) {
  absl::StatusOr<std::vector<v1::Trial>> trials = ExpandSweep(spec);
  EXPECT_TRUE(trials.ok()) << trials.status();
  return trials.ok() ? *trials : std::vector<v1::Trial>{};
}

TEST(ExpandSweepTest, ConditionalTiles) {
  const v1::SweepSpec spec = TinyLayerSpec(R"pb(
    space {
      moe_backends: "cpu_reference"
      moe_backends: "cpu_blocked"
      moe_backends: "fused_gemv"
      tiles { block_n: 16 block_k: 256 }
      tiles { block_n: 16 block_k: 512 }
      tiles { block_n: 8 block_k: 128 }
    }
  )pb");
  // 16x256 belongs to both tiled backends, 16x512 to fused_gemv only, 8x128
  // to cpu_blocked only. On tiny (hidden 256, moe_intermediate 128) the
  // cpu_blocked 16x256 cannot run: block_k 256 does not divide 128. The GPU
  // rule does not look at block_k, and block_n 16 divides 2 x 128 and 256, so
  // fused_gemv keeps both of its tiles.
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"cpu_reference", "-", 1, 1, false},
                                     Row{"cpu_blocked", "8x128", 1, 1, false},
                                     Row{"fused_gemv", "16x256", 1, 1, false},
                                     Row{"fused_gemv", "16x512", 1, 1, false}));
}

// fused_gemv_fp8 runs one token: it has points at batch 1 only, and a tile
// whose block_k does not divide both K (hidden 6144, slice 2048 / tp) is out.
TEST(ExpandSweepTest, BatchLimitedBackendOnlyAtItsBatches) {
  const v1::SweepSpec spec = Parse(R"pb(
    workload {
      model_preset: "glm5"
      batch_sizes: 1
      batch_sizes: 8
      context_lengths: 256
      region: MOE_LAYER
    }
    space {
      moe_backends: "fused_gemv"
      moe_backends: "fused_gemv_fp8"
      tiles { block_n: 128 block_k: 512 }
      tp: 1
      tp: 8
    }
  )pb");
  const std::vector<v1::Trial> trials = Expand(spec);
  std::vector<std::tuple<int, std::string, int>> got;
  for (const v1::Trial& t : trials) {
    got.emplace_back(t.workload().batch_size(), t.config().moe_backend(),
                     t.config().tp());
  }
  // fused_gemv has no 128x512 and keeps its default 16x256 (ragged K is
  // fine for it); fused_gemv_fp8's 128x512 fits tp 1 only (tp 8: slice 256,
  // which 512 does not divide).
  EXPECT_THAT(got,
              ::testing::ElementsAre(std::make_tuple(1, "fused_gemv", 1),
                                     std::make_tuple(1, "fused_gemv", 8),
                                     std::make_tuple(1, "fused_gemv_fp8", 1),
                                     std::make_tuple(8, "fused_gemv", 1),
                                     std::make_tuple(8, "fused_gemv", 8)));
}

TEST(ExpandSweepTest, DefaultTileWhenNoneListedForTheBackend) {
  v1::SweepSpec spec = TinyLayerSpec(R"pb(
    space { moe_backends: "cpu_blocked" moe_backends: "fused_gemv" }
  )pb");
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"cpu_blocked", "4x64", 1, 1, false},
                                     Row{"fused_gemv", "16x256", 1, 1, false}));
  v1::TileShape* tile = spec.mutable_space()->add_tiles();
  tile->set_block_n(32);
  tile->set_block_k(512);  // cpu_blocked's only; fused_gemv keeps its default
  // 32x512 is cpu_blocked's pick, but block_k 512 divides neither 256 nor 128
  // on tiny: the listed tile cannot run, so cpu_blocked has no point at all
  // (no fallback to the default 4x64 the spec did not ask for).
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"fused_gemv", "16x256", 1, 1, false}));
  // On glm5 (hidden 6144, moe_intermediate 2048) it fits: 512 divides both.
  spec.mutable_workload()->set_model_preset("glm5");
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"cpu_blocked", "32x512", 1, 1, false},
                                     Row{"fused_gemv", "16x256", 1, 1, false}));
}

TEST(ExpandSweepTest, WorldSizeFiltersTpEpPairs) {
  v1::SweepSpec spec = Parse(R"pb(
    workload { model_preset: "tiny" batch_sizes: 1 context_lengths: 256 }
    space { moe_backends: "cpu_reference" tp: 1 tp: 2 tp: 4 ep: 1 ep: 2 }
  )pb");
  EXPECT_EQ(Expand(spec).size(), 6u);  // 3 x 2, no filter
  spec.mutable_space()->set_world_size(4);
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"cpu_reference", "-", 2, 2, false},
                                     Row{"cpu_reference", "-", 4, 1, false}));
  spec.mutable_space()->set_world_size(1);
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"cpu_reference", "-", 1, 1, false}));
}

TEST(ExpandSweepTest, CudaGraphOnlyForGpuBackends) {
  const v1::SweepSpec spec = TinyLayerSpec(R"pb(
    space {
      moe_backends: "cpu_reference"
      moe_backends: "dequant_cublas"
      moe_backends: "cpu_blocked"
      moe_backends: "fused_gemv"
      cuda_graph: true
      cuda_graph: false
    }
  )pb");
  // fused_gemv (GPU, capturable) takes the list in order. dequant_cublas is a
  // GPU backend too but its region cannot be captured in a CUDA graph
  // (graph_capturable false): false only, like the CPU backends.
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"cpu_reference", "-", 1, 1, false},
                                     Row{"dequant_cublas", "-", 1, 1, false},
                                     Row{"cpu_blocked", "4x64", 1, 1, false},
                                     Row{"fused_gemv", "16x256", 1, 1, true},
                                     Row{"fused_gemv", "16x256", 1, 1, false}));
}

// ------------------------------------------- only points that can run --

TEST(ExpandSweepTest, CpuTileMustDivideThePresetDims) {
  v1::SweepSpec spec = TinyLayerSpec(R"pb(
    space {
      moe_backends: "cpu_reference"
      moe_backends: "cpu_blocked"
      tiles { block_n: 16 block_k: 256 }
    }
  )pb");
  // tiny: hidden 256, moe_intermediate 128. block_k 256 divides hidden but
  // not the 128-element slice of down: 16x256 is not in the space.
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"cpu_reference", "-", 1, 1, false}));
  // glm5: hidden 6144 = 24 x 256, moe_intermediate 2048 = 8 x 256: it is.
  spec.mutable_workload()->set_model_preset("glm5");
  EXPECT_THAT(
      Rows(Expand(spec)),
      ::testing::ElementsAre(Row{"cpu_reference", "-", 1, 1, false},
                             Row{"cpu_blocked", "16x256", 1, 1, false}));
}

TEST(ExpandSweepTest, TileFitIsCheckedAtEachTp) {
  const v1::SweepSpec spec = TinyLayerSpec(R"pb(
    space {
      moe_backends: "cpu_blocked"
      moe_backends: "fused_gemv"
      tiles { block_n: 4 block_k: 64 }
      tiles { block_n: 8 block_k: 128 }
      tiles { block_n: 32 block_k: 256 }
      tp: 1
      tp: 2
      tp: 4
    }
  )pb");
  // tiny's moe_intermediate / tp: 128, 64, 32 at tp 1, 2, 4 (hidden 256).
  // cpu_blocked 4x64: 64 divides 128 and 64, not 32 -> tp 1, 2.
  // cpu_blocked 8x128: 128 divides only 128 -> tp 1 (not at tp 2 or 4).
  // fused_gemv 32x256: slices 128 and 64 are multiples of 64 and 32 divides
  // 2 x slice and 256; the 32-element slice is not a multiple of 64 -> tp 1, 2.
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"cpu_blocked", "4x64", 1, 1, false},
                                     Row{"cpu_blocked", "4x64", 2, 1, false},
                                     Row{"cpu_blocked", "8x128", 1, 1, false},
                                     Row{"fused_gemv", "32x256", 1, 1, false},
                                     Row{"fused_gemv", "32x256", 2, 1, false}));
}

TEST(ExpandSweepTest, DequantCublasNeverGetsCudaGraph) {
  const v1::SweepSpec spec = Parse(R"pb(
    workload {
      model_preset: "glm5"
      batch_sizes: 1
      context_lengths: 256
      region: MOE_LAYER
    }
    space {
      moe_backends: "dequant_cublas"
      moe_backends: "fused_gemv"
      cuda_graph: true
    }
  )pb");
  // The space asks for graphs only: fused_gemv gets them, dequant_cublas
  // (not capturable) still gets its one point, without a graph.
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"dequant_cublas", "-", 1, 1, false},
                                     Row{"fused_gemv", "16x256", 1, 1, true}));
}

TEST(ExpandSweepTest, UntiledGpuBackendNeedsWholeChunksOfTheSlice) {
  const v1::SweepSpec spec = TinyLayerSpec(R"pb(
    space { moe_backends: "dequant_cublas" tp: 1 tp: 2 tp: 4 }
  )pb");
  // tiny's slice is 128 / tp: 128 and 64 are whole 64-element chunks, 32 not.
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"dequant_cublas", "-", 1, 1, false},
                                     Row{"dequant_cublas", "-", 2, 1, false}));
}

TEST(ExpandSweepTest, WorkloadMajorOrderAndTrialFields) {
  const v1::SweepSpec spec = Parse(R"pb(
    workload {
      model_preset: "tiny"
      batch_sizes: 4
      batch_sizes: 1
      context_lengths: 128
      context_lengths: 256
      seed: 9
      routing { distribution: SKEWED skew: 1.25 }
    }
    space { moe_backends: "cpu_reference" moe_backends: "cpu_blocked" }
    measurement { iterations: 7 }
  )pb");
  const std::vector<v1::Trial> trials = Expand(spec);
  ASSERT_EQ(trials.size(), 8u);  // 2 batches x 2 contexts x 2 backends
  const std::vector<std::pair<int, int>> expected = {
      {4, 128}, {4, 128}, {4, 256}, {4, 256},
      {1, 128}, {1, 128}, {1, 256}, {1, 256}};
  for (size_t i = 0; i < trials.size(); ++i) {
    const v1::Trial& t = trials[i];
    EXPECT_EQ(t.workload().batch_size(), expected[i].first) << i;
    EXPECT_EQ(t.workload().context_length(), expected[i].second) << i;
    EXPECT_EQ(t.config().moe_backend(),
              i % 2 == 0 ? "cpu_reference" : "cpu_blocked");
    EXPECT_EQ(t.workload().model_preset(), "tiny");
    EXPECT_EQ(t.workload().layers(), 4);
    EXPECT_EQ(t.workload().seed(), 9u);
    EXPECT_EQ(t.workload().region(), v1::DECODE_STEP);
    EXPECT_EQ(t.workload().routing().distribution(), v1::Routing::SKEWED);
    EXPECT_EQ(t.workload().routing().skew(), 1.25);
    EXPECT_EQ(t.workload_hash(), WorkloadHash(t.workload()));
    EXPECT_EQ(t.state(), v1::QUEUED);
    EXPECT_EQ(t.trial_id(), 0);
    EXPECT_EQ(t.measurement().iterations(), 7);  // the rest: defaults
    EXPECT_EQ(t.measurement().max_attempts(), 3);
  }
  EXPECT_EQ(trials[0].workload_hash(), trials[1].workload_hash());
  EXPECT_NE(trials[0].workload_hash(), trials[2].workload_hash());
  EXPECT_NE(trials[0].workload_hash(), trials[4].workload_hash());
}

TEST(ExpandSweepTest, EveryTrialCarriesTheChain) {
  const v1::SweepSpec spec = Parse(R"pb(
    workload {
      model_preset: "tiny"
      batch_sizes: 1
      batch_sizes: 8
      context_lengths: 128
      region: MOE_LAYER
      chain_layers: 4
    }
    space { moe_backends: "fused_gemv" }
  )pb");
  const std::vector<v1::Trial> trials = Expand(spec);
  ASSERT_FALSE(trials.empty());
  for (const v1::Trial& t : trials) EXPECT_EQ(t.workload().chain_layers(), 4);
}

TEST(ExpandSweepTest, FullGridCount) {
  // 2 batches x 3 contexts x [cpu_reference 1 + cpu_blocked 2 tiles +
  // fused_gemv 2 tiles x 2 graphs + grouped_mma 1 default tile x 2 graphs]
  // x (tp, ep) in {1,2} x {1,4} = 4 pairs.
  const v1::SweepSpec spec = Parse(R"pb(
    workload {
      model_preset: "glm5"
      batch_sizes: 1
      batch_sizes: 64
      context_lengths: 1
      context_lengths: 4096
      context_lengths: 65536
      region: MOE_LAYER
    }
    space {
      moe_backends: "cpu_reference"
      moe_backends: "cpu_blocked"
      moe_backends: "fused_gemv"
      moe_backends: "grouped_mma"
      tiles { block_n: 4 block_k: 64 }
      tiles { block_n: 8 block_k: 128 }
      tiles { block_n: 32 block_k: 256 }
      tiles { block_n: 16 block_k: 512 }
      tp: 1
      tp: 2
      ep: 1
      ep: 4
      cuda_graph: false
      cuda_graph: true
    }
  )pb");
  EXPECT_EQ(Expand(spec).size(), 2u * 3u * (1 + 2 + 4 + 2) * 4u);
}

TEST(ExpandSweepTest, MaxTrialsKeepsTheFirstInGridOrder) {
  v1::SweepSpec spec = Parse(R"pb(
    workload {
      model_preset: "tiny"
      batch_sizes: 1
      batch_sizes: 2
      context_lengths: 256
    }
    space { moe_backends: "cpu_reference" moe_backends: "cpu_blocked" }
  )pb");
  const std::vector<v1::Trial> all = Expand(spec);
  ASSERT_EQ(all.size(), 4u);
  spec.mutable_strategy()->set_max_trials(3);
  const std::vector<v1::Trial> capped = Expand(spec);
  ASSERT_EQ(capped.size(), 3u);
  for (size_t i = 0; i < capped.size(); ++i) {
    EXPECT_EQ(capped[i].SerializeAsString(), all[i].SerializeAsString());
  }
  spec.mutable_strategy()->set_max_trials(100);
  EXPECT_EQ(Expand(spec).size(), 4u);
}

TEST(ExpandSweepTest, InvalidSpecIsRejected) {
  v1::SweepSpec spec = Parse(R"pb(
    workload { model_preset: "tiny" batch_sizes: 1 context_lengths: 256 }
    space { moe_backends: "cpu_reference" tp: 3 }
  )pb");
  const absl::StatusOr<std::vector<v1::Trial>> trials = ExpandSweep(spec);
  EXPECT_EQ(trials.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(trials.status().message()),
              ::testing::StartsWith("space.tp[0]: 3 is not allowed"));
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

// The H200 sessions' specs (scripts/gpu_session.sh): valid, and the chained
// one's trials all chain 8 layers.
TEST(DeploySpecsTest, H200SpecsValidateAndExpand) {
  for (const std::string name : {"h200_sweep.json", "h200_chain_sweep.json"}) {
    const v1::SweepSpec spec = ReadDeploySpec(name);
    ASSERT_TRUE(ValidateSweepSpec(spec).ok())
        << name << ": " << ValidateSweepSpec(spec);
    const std::vector<v1::Trial> trials = Expand(spec);
    EXPECT_GE(trials.size(), 12u) << name;
    for (const v1::Trial& t : trials) {
      EXPECT_EQ(t.workload().chain_layers(),
                name == "h200_chain_sweep.json" ? 8 : 0);
    }
  }
}

TEST(ExampleSweepTest, ParsesValidatesAndExpands) {
  const v1::SweepSpec spec = ReadDeploySpec("example_sweep.json");
  EXPECT_EQ(spec.workload().model_preset(), "tiny");
  EXPECT_EQ(spec.workload().seed(), 42u);
  ASSERT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
  const std::vector<v1::Trial> trials = Expand(spec);
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

}  // namespace
}  // namespace moetune::tuner
