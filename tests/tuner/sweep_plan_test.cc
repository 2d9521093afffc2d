// The sweep plan: the space of a spec expanded once, in grid order, with
// only the points each backend's descriptor can run.
#include "tuner/sweep_plan.h"

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/tuner/strategy_test_util.h"
#include "tuner/spec.h"

namespace moetune::tuner {
namespace {

using testing::Parse;
using testing::TinyLayerSpec;

// ------------------------------------------------------------- expansion --

// (backend, "NxK" or "-", tp, ep, cuda_graph) of each trial, in order.
using Row = std::tuple<std::string, std::string, int, int, bool>;
std::vector<Row> Rows(const std::vector<v1::Trial>& trials) {
  std::vector<Row> rows;
  for (const v1::Trial& t : trials) {
    const v1::TrialConfig& c = t.config();
    rows.emplace_back(c.moe_backend(), TileText(c), c.tp(), c.ep(),
                      c.cuda_graph());
  }
  return rows;
}

std::vector<v1::Trial> Expand(const v1::SweepSpec& spec) {
  absl::StatusOr<std::vector<v1::Trial>> trials = testing::Expand(spec);
  EXPECT_TRUE(trials.ok()) << trials.status();
  return trials.ok() ? *trials : std::vector<v1::Trial>{};
}

TEST(SweepPlanTest, ConditionalTiles) {
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
TEST(SweepPlanTest, BatchLimitedBackendOnlyAtItsBatches) {
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

TEST(SweepPlanTest, DefaultTileWhenNoneListedForTheBackend) {
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
  // fused_gemv there takes the tile measured fastest on whole GLM-5 experts.
  spec.mutable_workload()->set_model_preset("glm5");
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"cpu_blocked", "32x512", 1, 1, false},
                                     Row{"fused_gemv", "16x512", 1, 1, false}));
}

// A backend whose default tile does not fit a layout runs there with the
// first of its tiles that does, when the spec names none of them:
// fused_gemv_fp8's 128x512 does not divide GLM-5's TP8 slice of 256.
TEST(SweepPlanTest, FirstFittingTileWhereTheDefaultDoesNotFit) {
  v1::SweepSpec spec = TinyLayerSpec(R"pb(
    space { moe_backends: "fused_gemv_fp8" tp: 1 tp: 8 cuda_graph: true }
  )pb");
  spec.mutable_workload()->set_model_preset("glm5");
  EXPECT_THAT(
      Rows(Expand(spec)),
      ::testing::ElementsAre(Row{"fused_gemv_fp8", "128x512", 1, 1, true},
                             Row{"fused_gemv_fp8", "128x256", 8, 1, true}));
  // A listed tile of its own is kept as listed: 128x512 alone runs TP1 only.
  v1::TileShape* tile = spec.mutable_space()->add_tiles();
  tile->set_block_n(128);
  tile->set_block_k(512);
  EXPECT_THAT(
      Rows(Expand(spec)),
      ::testing::ElementsAre(Row{"fused_gemv_fp8", "128x512", 1, 1, true}));
}

// A ring kernel's pipeline depth is a tile of its own: listed depths become
// trials beside the listed shapes, and each trial's tile says its depth.
TEST(SweepPlanTest, RingDepthsAreTilesTheTunerSweeps) {
  v1::SweepSpec spec = TinyLayerSpec(R"pb(
    space {
      moe_backends: "grouped_wgmma"
      tiles { block_n: 128 block_k: 256 }
      tiles { block_n: 128 block_k: 256 stages: 2 }
      tiles { block_n: 128 block_k: 256 stages: 6 }
    }
  )pb");
  spec.mutable_workload()->set_model_preset("glm5");
  const std::vector<v1::Trial> trials = Expand(spec);
  EXPECT_THAT(
      Rows(trials),
      ::testing::ElementsAre(Row{"grouped_wgmma", "128x256", 1, 1, false},
                             Row{"grouped_wgmma", "128x256s2", 1, 1, false},
                             Row{"grouped_wgmma", "128x256s6", 1, 1, false}));
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[1].config().tile().stages(), 2);
}

TEST(SweepPlanTest, WorldSizeFiltersTpEpPairs) {
  v1::SweepSpec spec = Parse(R"pb(
    workload { model_preset: "tiny" batch_sizes: 1 context_lengths: 256 }
    space { moe_backends: "cpu_reference" tp: 1 tp: 2 tp: 4 ep: 1 ep: 2 }
  )pb");
  // 3 x 2 less (4, 2): a whole step splits tiny's 4 heads over <= 4 ranks.
  EXPECT_EQ(Expand(spec).size(), 5u);
  spec.mutable_workload()->set_region(v1::MOE_LAYER);
  EXPECT_EQ(Expand(spec).size(), 6u);  // an MoE layer alone: no filter
  spec.mutable_workload()->set_region(v1::DECODE_STEP);
  spec.mutable_space()->set_world_size(4);
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"cpu_reference", "-", 2, 2, false},
                                     Row{"cpu_reference", "-", 4, 1, false}));
  spec.mutable_space()->set_world_size(1);
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"cpu_reference", "-", 1, 1, false}));
}

TEST(SweepPlanTest, CudaGraphOnlyForGpuBackends) {
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

TEST(SweepPlanTest, CpuTileMustDivideThePresetDims) {
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

// A warm trial process keeps its shard while the backend and the layout
// stay: each (backend, tp, ep) of a workload is one run of trials, its
// tiles and graph modes inside it.
TEST(SweepPlanTest, EachLayoutOfABackendIsOneRunOfTrials) {
  const v1::SweepSpec spec = TinyLayerSpec(R"pb(
    space {
      moe_backends: "cpu_blocked"
      moe_backends: "cpu_reference"
      tiles { block_n: 4 block_k: 64 }
      tiles { block_n: 8 block_k: 128 }
      tp: 1
      tp: 2
      ep: 1
      ep: 2
      cuda_graph: false
      cuda_graph: true
    }
  )pb");
  const std::vector<v1::Trial> trials = Expand(spec);
  ASSERT_GT(trials.size(), 8u);
  std::set<std::string> finished;
  std::string current;
  for (const v1::Trial& t : trials) {
    const v1::TrialConfig& c = t.config();
    const std::string layout = t.workload_hash() + " " + c.moe_backend() + " " +
                               std::to_string(c.tp()) + "x" +
                               std::to_string(c.ep());
    if (layout == current) continue;
    EXPECT_TRUE(finished.insert(current).second || current.empty()) << current;
    EXPECT_EQ(finished.count(layout), 0u) << layout << " comes back";
    current = layout;
  }
}

TEST(SweepPlanTest, TileFitIsCheckedAtEachTp) {
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
  // A backend's layouts vary slower than its tiles (a shard per layout).
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"cpu_blocked", "4x64", 1, 1, false},
                                     Row{"cpu_blocked", "8x128", 1, 1, false},
                                     Row{"cpu_blocked", "4x64", 2, 1, false},
                                     Row{"fused_gemv", "32x256", 1, 1, false},
                                     Row{"fused_gemv", "32x256", 2, 1, false}));
}

TEST(SweepPlanTest, DequantCublasNeverGetsCudaGraph) {
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
  // (not capturable) still gets its one point, without a graph; on glm5
  // fused_gemv takes its measured best tile.
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"dequant_cublas", "-", 1, 1, false},
                                     Row{"fused_gemv", "16x512", 1, 1, true}));
}

TEST(SweepPlanTest, UntiledGpuBackendNeedsWholeChunksOfTheSlice) {
  const v1::SweepSpec spec = TinyLayerSpec(R"pb(
    space { moe_backends: "dequant_cublas" tp: 1 tp: 2 tp: 4 }
  )pb");
  // tiny's slice is 128 / tp: 128 and 64 are whole 64-element chunks, 32 not.
  EXPECT_THAT(Rows(Expand(spec)),
              ::testing::ElementsAre(Row{"dequant_cublas", "-", 1, 1, false},
                                     Row{"dequant_cublas", "-", 2, 1, false}));
}

TEST(SweepPlanTest, WorkloadMajorOrderAndTrialFields) {
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

TEST(SweepPlanTest, EveryTrialCarriesTheChain) {
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

TEST(SweepPlanTest, FullGridCount) {
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

// A budget is the strategy's business: the plan is the whole space.
TEST(SweepPlanTest, BudgetsDoNotShrinkThePlan) {
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
  EXPECT_EQ(Expand(spec).size(), 4u);
}

TEST(SweepPlanTest, WorkloadsSharingABatchShareTheirConfigs) {
  const v1::SweepSpec spec = Parse(R"pb(
    workload {
      model_preset: "tiny"
      batch_sizes: 1
      batch_sizes: 2
      context_lengths: 256
      context_lengths: 512
    }
    space { moe_backends: "cpu_reference" moe_backends: "cpu_blocked" }
  )pb");
  const absl::StatusOr<std::shared_ptr<const SweepPlan>> plan =
      SweepPlan::Create(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ((*plan)->workload_count(), 4);
  EXPECT_EQ(&(*plan)->configs(0), &(*plan)->configs(1));
  EXPECT_NE(&(*plan)->configs(0), &(*plan)->configs(2));
  EXPECT_EQ((*plan)->point_count(), 8);
  EXPECT_NE((*plan)->workload_hash(0), (*plan)->workload_hash(1));
  // The stored (normalised) spec plans to the same points, unvalidated.
  const std::shared_ptr<const SweepPlan> again =
      SweepPlan::FromNormalized((*plan)->spec());
  ASSERT_EQ(again->point_count(), 8);
  EXPECT_EQ(again->AllPoints()[5].SerializeAsString(),
            (*plan)->AllPoints()[5].SerializeAsString());
}

TEST(SweepPlanTest, ChainOfOneIsStoredAsUnchained) {
  v1::SweepSpec spec = TinyLayerSpec(R"pb(
    space { moe_backends: "fused_gemv" }
  )pb");
  spec.mutable_workload()->set_chain_layers(1);
  const absl::StatusOr<std::shared_ptr<const SweepPlan>> plan =
      SweepPlan::Create(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->spec().workload().chain_layers(), 0);
  EXPECT_EQ((*plan)->workload(0).chain_layers(), 0);
}

// Each KV cache dtype is a workload of its own (batch x context x dtype, in
// list order), the quantization map is carried by every workload, and the
// explicit defaults are stored as unset: the same workloads, hashes and
// proposal keys as a spec that does not name them.
TEST(SweepPlanTest, KvCacheDtypesAreWorkloadsAndDefaultsStayUnset) {
  v1::SweepSpec spec = Parse(R"pb(
    workload {
      model_preset: "tiny"
      batch_sizes: 1
      batch_sizes: 2
      context_lengths: 64
      kv_cache_dtypes: KV_BF16
      kv_cache_dtypes: KV_FP8_E4M3
      quantization { attention: NVFP4 dense_mlp: NVFP4 lm_head: BF16 }
    }
    space { moe_backends: "cpu_reference" }
  )pb");
  const absl::StatusOr<std::shared_ptr<const SweepPlan>> plan =
      SweepPlan::Create(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ((*plan)->workload_count(), 4);
  EXPECT_EQ((*plan)->point_count(), 4);
  const std::vector<v1::KvCacheDtype> want = {
      v1::KV_CACHE_DTYPE_UNSPECIFIED, v1::KV_FP8_E4M3,
      v1::KV_CACHE_DTYPE_UNSPECIFIED, v1::KV_FP8_E4M3};
  for (int i = 0; i < 4; ++i) {
    const v1::Workload& w = (*plan)->workload(i);
    EXPECT_EQ(w.batch_size(), i < 2 ? 1 : 2);
    EXPECT_EQ(w.kv_cache_dtype(), want[i]) << i;
    EXPECT_EQ(w.quantization().attention(), v1::NVFP4);
    // dense_mlp NVFP4 and lm_head BF16 are the defaults: not stored.
    EXPECT_EQ(w.quantization().dense_mlp(), v1::PRECISION_UNSPECIFIED);
    EXPECT_EQ(w.quantization().lm_head(), v1::PRECISION_UNSPECIFIED);
  }
  EXPECT_NE((*plan)->workload_hash(0), (*plan)->workload_hash(1));

  // The BF16 workloads of a spec naming only defaults are those of a spec
  // naming nothing: same bytes, same hash, same trials.
  v1::SweepSpec named = spec;
  named.mutable_workload()->clear_kv_cache_dtypes();
  named.mutable_workload()->add_kv_cache_dtypes(v1::KV_BF16);
  named.mutable_workload()->mutable_quantization()->set_attention(v1::BF16);
  v1::SweepSpec unnamed = named;
  unnamed.mutable_workload()->clear_kv_cache_dtypes();
  unnamed.mutable_workload()->clear_quantization();
  const auto a = SweepPlan::Create(named);
  const auto b = SweepPlan::Create(unnamed);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*a)->workload_count(), (*b)->workload_count());
  for (int i = 0; i < (*a)->workload_count(); ++i) {
    EXPECT_FALSE((*a)->workload(i).has_quantization());
    EXPECT_EQ((*a)->workload_hash(i), (*b)->workload_hash(i));
    EXPECT_EQ((*a)->AllPoints()[i].SerializeAsString(),
              (*b)->AllPoints()[i].SerializeAsString());
  }
}

TEST(SweepPlanTest, InvalidSpecIsRejected) {
  v1::SweepSpec spec = Parse(R"pb(
    workload { model_preset: "tiny" batch_sizes: 1 context_lengths: 256 }
    space { moe_backends: "cpu_reference" tp: 3 }
  )pb");
  const absl::StatusOr<std::vector<v1::Trial>> trials = testing::Expand(spec);
  EXPECT_EQ(trials.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(trials.status().message()),
              ::testing::StartsWith("space.tp[0]: 3 is not allowed"));
}

}  // namespace
}  // namespace moetune::tuner
