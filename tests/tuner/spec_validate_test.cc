// Every error path of ValidateSweepSpec: the exact field path prefix, and
// that the message lists what is allowed.
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "kernels/backends/registry.h"
#include "tuner/spec.h"

namespace moetune::tuner {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

v1::SweepSpec Parse(const std::string& text) {
  v1::SweepSpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec))
      << text;
  return spec;
}

// Valid: the smallest spec with a CPU and a GPU backend.
v1::SweepSpec Base() {
  return Parse(R"pb(
    workload {
      model_preset: "tiny"
      batch_sizes: 1
      context_lengths: 256
      region: MOE_LAYER
    }
    space { moe_backends: "cpu_blocked" moe_backends: "fused_gemv" }
  )pb");
}

std::string ErrorOf(const v1::SweepSpec& spec) {
  const absl::Status status = ValidateSweepSpec(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  return std::string(status.message());
}

TEST(ValidateTest, BaseIsValid) {
  EXPECT_TRUE(ValidateSweepSpec(Base()).ok()) << ValidateSweepSpec(Base());
}

// A name is bounded and printable: megabytes of name would break every
// listing, terminal escapes every table that prints it.
TEST(ValidateTest, NamesAreBoundedPrintableText) {
  v1::SweepSpec spec = Base();
  spec.set_name(std::string(1572864, 'x'));
  EXPECT_EQ(ErrorOf(spec), "name: 1572864 bytes; at most 256");
  spec.set_name("nightly\x1b]0;owned\x07");
  EXPECT_THAT(ErrorOf(spec), ::testing::HasSubstr("name: byte 7 is not "
                                                  "printable text"));
  spec.set_name("nightly \xe2\x80\xae gnp.exe");
  EXPECT_THAT(ErrorOf(spec), ::testing::HasSubstr("name: byte 8"));
  spec.set_name("nightly décodage");
  EXPECT_TRUE(ValidateSweepSpec(spec).ok());
}

TEST(ValidateTest, UnknownPreset) {
  v1::SweepSpec spec = Base();
  spec.mutable_workload()->set_model_preset("x");
  EXPECT_EQ(ErrorOf(spec),
            "workload.model_preset: unknown preset 'x'; allowed: glm5, tiny");
  spec.mutable_workload()->clear_model_preset();
  EXPECT_EQ(ErrorOf(spec),
            "workload.model_preset: unknown preset ''; allowed: glm5, tiny");
}

TEST(ValidateTest, LayersAgainstThePreset) {
  v1::SweepSpec spec = Base();
  spec.mutable_workload()->set_layers(5);
  EXPECT_THAT(ErrorOf(spec),
              StartsWith("workload.layers: 5 is out of range; allowed: 0..4"));
  spec.mutable_workload()->set_layers(-1);
  EXPECT_THAT(ErrorOf(spec), StartsWith("workload.layers: -1 is out of range"));
  spec.mutable_workload()->set_layers(4);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok());
  spec.mutable_workload()->set_model_preset("glm5");
  spec.mutable_workload()->set_layers(78);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok());
  spec.mutable_workload()->set_layers(79);
  EXPECT_THAT(
      ErrorOf(spec),
      StartsWith("workload.layers: 79 is out of range; allowed: 0..78"));
}

TEST(ValidateTest, BatchSizes) {
  v1::SweepSpec spec = Base();
  spec.mutable_workload()->clear_batch_sizes();
  EXPECT_EQ(ErrorOf(spec), "workload.batch_sizes: must not be empty");
  spec.mutable_workload()->add_batch_sizes(0);
  EXPECT_EQ(ErrorOf(spec),
            "workload.batch_sizes[0]: 0 is out of range; allowed: 1..4096");
  spec.mutable_workload()->set_batch_sizes(0, 4096);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok());
  spec.mutable_workload()->add_batch_sizes(4097);
  EXPECT_EQ(ErrorOf(spec),
            "workload.batch_sizes[1]: 4097 is out of range; allowed: 1..4096");
  spec.mutable_workload()->set_batch_sizes(1, 8);
  spec.mutable_workload()->add_batch_sizes(4096);
  EXPECT_THAT(ErrorOf(spec),
              StartsWith("workload.batch_sizes[2]: 4096 is repeated (first at "
                         "[0])"));
}

TEST(ValidateTest, ContextLengths) {
  v1::SweepSpec spec = Base();
  spec.mutable_workload()->clear_context_lengths();
  EXPECT_EQ(ErrorOf(spec), "workload.context_lengths: must not be empty");
  spec.mutable_workload()->add_context_lengths(1048576);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok());
  spec.mutable_workload()->add_context_lengths(1048577);
  EXPECT_EQ(ErrorOf(spec),
            "workload.context_lengths[1]: 1048577 is out of range; allowed: "
            "1..1048576");
  spec.mutable_workload()->set_context_lengths(1, -3);
  EXPECT_THAT(ErrorOf(spec),
              StartsWith("workload.context_lengths[1]: -3 is out of range"));
}

TEST(ValidateTest, SkewedRoutingNeedsPositiveSkew) {
  v1::SweepSpec spec = Base();
  v1::Routing& routing = *spec.mutable_workload()->mutable_routing();
  routing.set_distribution(v1::Routing::SKEWED);
  EXPECT_THAT(ErrorOf(spec), StartsWith("workload.routing.skew: 0 is out of "
                                        "range; allowed: finite values > 0"));
  routing.set_skew(-1);
  EXPECT_THAT(ErrorOf(spec), StartsWith("workload.routing.skew: -1 is out"));
  routing.set_skew(NAN);
  EXPECT_THAT(ErrorOf(spec), StartsWith("workload.routing.skew: nan is out"));
  routing.set_skew(1.0);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok());
}

TEST(ValidateTest, SkewOrHistogramWithoutTheirDistribution) {
  v1::SweepSpec spec = Base();
  v1::Routing& routing = *spec.mutable_workload()->mutable_routing();
  routing.set_skew(1.0);  // distribution left UNSPECIFIED = UNIFORM
  EXPECT_THAT(ErrorOf(spec),
              StartsWith("workload.routing.skew: is only used by SKEWED"));
  routing.set_distribution(v1::Routing::SKEWED);
  routing.add_histogram(1.0);
  EXPECT_THAT(ErrorOf(spec),
              StartsWith("workload.routing.histogram: is only used by "
                         "REPLAYED"));
}

TEST(ValidateTest, ReplayedRoutingHistogram) {
  v1::SweepSpec spec = Base();
  v1::Routing& routing = *spec.mutable_workload()->mutable_routing();
  routing.set_distribution(v1::Routing::REPLAYED);
  EXPECT_EQ(ErrorOf(spec),
            "workload.routing.histogram: must not be empty for REPLAYED "
            "routing");
  routing.add_histogram(1.0);
  EXPECT_THAT(ErrorOf(spec),
              StartsWith("workload.routing.histogram: has 1 entries; allowed: "
                         "exactly 32"));
  for (int i = 1; i < 32; ++i) routing.add_histogram(0.0);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok());
  routing.set_histogram(3, -1.0);
  EXPECT_EQ(ErrorOf(spec),
            "workload.routing.histogram[3]: -1 is out of range; allowed: "
            "finite values >= 0");
  routing.set_histogram(3, 0.0);
  routing.set_histogram(0, 0.0);
  EXPECT_EQ(ErrorOf(spec),
            "workload.routing.histogram: all entries are 0; allowed: at least "
            "one > 0");
}

TEST(ValidateTest, UnknownDistribution) {
  v1::SweepSpec spec = Base();
  spec.mutable_workload()->mutable_routing()->set_distribution(
      static_cast<v1::Routing::Distribution>(9));
  EXPECT_EQ(ErrorOf(spec),
            "workload.routing.distribution: 9 is not allowed; allowed: "
            "UNIFORM, SKEWED, REPLAYED");
}

TEST(ValidateTest, DecodeStepNeedsBackendsThatTimeIt) {
  v1::SweepSpec spec = Base();
  spec.mutable_workload()->set_region(v1::DECODE_STEP);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok()) << ErrorOf(spec);  // GPU too
  spec.mutable_space()->add_moe_backends("native_fp4");
  EXPECT_THAT(ErrorOf(spec),
              StartsWith("workload.region: DECODE_STEP is not timed by "
                         "'native_fp4'"));
  EXPECT_THAT(ErrorOf(spec), HasSubstr("allowed with it: MOE_LAYER"));
  spec.mutable_workload()->set_region(v1::REGION_UNSPECIFIED);  // = DECODE
  EXPECT_THAT(ErrorOf(spec), StartsWith("workload.region: DECODE_STEP is"));
  spec.mutable_workload()->set_region(v1::MOE_LAYER);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok());
  spec.mutable_workload()->set_region(static_cast<v1::Region>(5));
  EXPECT_EQ(ErrorOf(spec),
            "workload.region: 5 is not allowed; allowed: DECODE_STEP, "
            "MOE_LAYER");
}

TEST(ValidateTest, ChainLayersOnlyForGpuBackendsOnMoeLayers) {
  v1::SweepSpec spec = Base();
  spec.mutable_workload()->set_chain_layers(17);
  EXPECT_EQ(ErrorOf(spec),
            "workload.chain_layers: 17 is out of range; allowed: 0..16 (0 or "
            "1 = one layer)");
  spec.mutable_workload()->set_chain_layers(-1);
  EXPECT_THAT(ErrorOf(spec), StartsWith("workload.chain_layers: -1 is out"));
  spec.mutable_workload()->set_chain_layers(4);
  EXPECT_EQ(ErrorOf(spec),
            "workload.chain_layers: 'cpu_blocked' times one layer; chains are "
            "timed by GPU backends only");
  spec.mutable_space()->set_moe_backends(0, "fused_gemv_fp8");
  EXPECT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
  spec.mutable_space()->clear_moe_backends();
  spec.mutable_space()->add_moe_backends("cpu_reference");
  spec.mutable_workload()->set_region(v1::DECODE_STEP);
  EXPECT_EQ(ErrorOf(spec),
            "workload.chain_layers: chains MoE layers; allowed with region: "
            "MOE_LAYER only");
  spec.mutable_workload()->set_chain_layers(1);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
}

TEST(ValidateTest, Backends) {
  v1::SweepSpec spec = Base();
  spec.mutable_space()->clear_moe_backends();
  EXPECT_EQ(ErrorOf(spec),
            "space.moe_backends: must not be empty; allowed: native: " +
                backends::KnownBackendNames() +
                "; plugin backends of the registered workers: none");
  spec.mutable_space()->add_moe_backends("foo");
  EXPECT_EQ(ErrorOf(spec),
            "space.moe_backends[0]: unknown backend 'foo'; "
            "allowed: native: " +
                backends::KnownBackendNames() +
                "; plugin backends of the registered workers: none");
  EXPECT_THAT(ErrorOf(spec),
              HasSubstr("cpu_reference, cpu_blocked, dequant_cublas, "
                        "fused_gemv, fused_gemv_fp8, fused_gemv_wgmma, "
                        "grouped_mma, grouped_wgmma, native_fp4"));
  spec.mutable_space()->set_moe_backends(0, "cpu_blocked");
  spec.mutable_space()->add_moe_backends("cpu_reference");
  spec.mutable_space()->add_moe_backends("cpu_blocked");
  EXPECT_THAT(ErrorOf(spec),
              StartsWith("space.moe_backends[2]: 'cpu_blocked' is repeated "
                         "(first at [0])"));
}

TEST(ValidateTest, TilesMustBelongToAListedBackend) {
  v1::SweepSpec spec = Base();
  auto add_tile = [&spec](int n, int k) {
    v1::TileShape* tile = spec.mutable_space()->add_tiles();
    tile->set_block_n(n);
    tile->set_block_k(k);
  };
  add_tile(8, 128);   // cpu_blocked
  add_tile(16, 512);  // fused_gemv
  EXPECT_TRUE(ValidateSweepSpec(spec).ok());
  add_tile(5, 64);
  EXPECT_EQ(ErrorOf(spec),
            "space.tiles[2]: {block_n: 5, block_k: 64} is not a tile of any "
            "listed backend; tiles of cpu_blocked: 4x64, 8x128, 16x256, "
            "32x512; tiles of fused_gemv: 16x256, 16x512, 32x256");
  spec.mutable_space()->mutable_tiles(2)->set_block_n(64);  // grouped_mma's
  EXPECT_THAT(ErrorOf(spec), StartsWith("space.tiles[2]: {block_n: 64, "
                                        "block_k: 64} is not a tile"));
  spec.mutable_space()->mutable_tiles(2)->set_block_n(8);
  spec.mutable_space()->mutable_tiles(2)->set_block_k(128);
  EXPECT_THAT(ErrorOf(spec),
              StartsWith("space.tiles[2]: 8x128 is repeated (first at [0])"));
}

// A ring depth is part of the tile: one the backend lists passes, another
// is refused with its stages named.
TEST(ValidateTest, TileStagesMustBeListedToo) {
  v1::SweepSpec spec = Base();
  spec.mutable_space()->clear_moe_backends();
  spec.mutable_space()->add_moe_backends("grouped_wgmma");
  v1::TileShape* tile = spec.mutable_space()->add_tiles();
  tile->set_block_n(128);
  tile->set_block_k(256);
  tile->set_stages(2);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok()) << ErrorOf(spec);
  tile->set_stages(5);
  EXPECT_THAT(ErrorOf(spec),
              StartsWith("space.tiles[0]: {block_n: 128, block_k: 256, "
                         "stages: 5} is not a tile of any listed backend; "
                         "tiles of grouped_wgmma: 128x256, 256x256, 128x128, "
                         "128x256s2, 128x128s4, 128x256s6"));
}

TEST(ValidateTest, TilesWithNoTiledBackendListed) {
  v1::SweepSpec spec = Base();
  spec.mutable_space()->clear_moe_backends();
  spec.mutable_space()->add_moe_backends("cpu_reference");
  v1::TileShape* tile = spec.mutable_space()->add_tiles();
  tile->set_block_n(8);
  tile->set_block_k(128);
  EXPECT_EQ(ErrorOf(spec),
            "space.tiles[0]: {block_n: 8, block_k: 128} is not a tile of any "
            "listed backend; no listed backend takes a tile");
}

TEST(ValidateTest, TpAndEpDegrees) {
  v1::SweepSpec spec = Base();
  spec.mutable_space()->add_tp(1);
  spec.mutable_space()->add_tp(3);
  EXPECT_EQ(ErrorOf(spec),
            "space.tp[1]: 3 is not allowed; allowed: 1, 2, 4, 8");
  spec.mutable_space()->set_tp(1, 1);
  EXPECT_THAT(ErrorOf(spec),
              StartsWith("space.tp[1]: 1 is repeated (first at [0])"));
  spec.mutable_space()->set_tp(1, 8);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok());
  spec.mutable_space()->add_ep(16);
  EXPECT_EQ(ErrorOf(spec),
            "space.ep[0]: 16 is not allowed; allowed: 1, 2, 4, 8");
  spec.mutable_space()->set_ep(0, 0);
  EXPECT_EQ(ErrorOf(spec),
            "space.ep[0]: 0 is not allowed; allowed: 1, 2, 4, 8");
}

TEST(ValidateTest, CudaGraphRepeat) {
  v1::SweepSpec spec = Base();
  spec.mutable_space()->add_cuda_graph(true);
  spec.mutable_space()->add_cuda_graph(false);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok());
  spec.mutable_space()->add_cuda_graph(true);
  EXPECT_THAT(ErrorOf(spec),
              StartsWith("space.cuda_graph[2]: true is repeated (first at "
                         "[0])"));
}

TEST(ValidateTest, WorldSize) {
  v1::SweepSpec spec = Base();
  spec.mutable_space()->set_world_size(3);
  EXPECT_EQ(ErrorOf(spec),
            "space.world_size: 3 is not allowed; allowed: 0 (no filter), 1, 2, "
            "4, 8");
  spec.mutable_space()->set_world_size(8);  // tp, ep empty = {1}
  EXPECT_THAT(ErrorOf(spec),
              StartsWith("space.world_size: no (tp, ep) pair has tp * ep == 8; "
                         "tp: {1}, ep: {1}"));
  spec.mutable_space()->add_tp(1);
  spec.mutable_space()->add_tp(2);
  spec.mutable_space()->add_ep(4);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok());  // 2 * 4
  spec.mutable_space()->set_world_size(1);
  EXPECT_THAT(ErrorOf(spec), StartsWith("space.world_size: no (tp, ep) pair "
                                        "has tp * ep == 1; tp: {1, 2}, ep: "
                                        "{4}"));
  spec.mutable_space()->set_world_size(4);  // 1 * 4
  EXPECT_TRUE(ValidateSweepSpec(spec).ok());
}

TEST(ValidateTest, Strategy) {
  v1::SweepSpec spec = Base();
  spec.mutable_strategy()->set_kind(static_cast<v1::Strategy::Kind>(7));
  EXPECT_EQ(ErrorOf(spec),
            "strategy.kind: 7 is not allowed; allowed: GRID, RANDOM, "
            "SUCCESSIVE_HALVING, TPE");
  spec.mutable_strategy()->set_kind(v1::Strategy::GRID);
  spec.mutable_strategy()->set_max_trials(-1);
  EXPECT_EQ(ErrorOf(spec),
            "strategy.max_trials: -1 is out of range; allowed: >= 0 (0 = no "
            "limit)");
  spec.mutable_strategy()->set_max_trials(5);
  spec.mutable_strategy()->set_max_gpu_seconds(-0.5);
  EXPECT_THAT(ErrorOf(spec), StartsWith("strategy.max_gpu_seconds: -0.5 is out "
                                        "of range; allowed: finite values >= "
                                        "0"));
  spec.mutable_strategy()->set_max_gpu_seconds(INFINITY);
  EXPECT_THAT(ErrorOf(spec), StartsWith("strategy.max_gpu_seconds: inf is"));
  spec.mutable_strategy()->set_max_gpu_seconds(3600);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok());
}

TEST(ValidateTest, MeasurementRanges) {
  v1::SweepSpec spec = Base();
  v1::Measurement& m = *spec.mutable_measurement();
  m.set_warmup_iterations(10001);
  EXPECT_EQ(ErrorOf(spec),
            "measurement.warmup_iterations: 10001 is out of range; allowed: "
            "1..10000 (0 = default 3)");
  m.set_warmup_iterations(-1);
  EXPECT_THAT(ErrorOf(spec), StartsWith("measurement.warmup_iterations: -1"));
  m.set_warmup_iterations(10000);
  m.set_iterations(100001);
  EXPECT_EQ(ErrorOf(spec),
            "measurement.iterations: 100001 is out of range; allowed: "
            "1..100000 (0 = default 20)");
  m.set_iterations(100000);
  m.set_trial_timeout_s(0.5);
  EXPECT_EQ(ErrorOf(spec),
            "measurement.trial_timeout_s: 0.5 is out of range; allowed: "
            "1..86400 (0 = default 120)");
  m.set_trial_timeout_s(86401);
  EXPECT_THAT(ErrorOf(spec), StartsWith("measurement.trial_timeout_s: 86401"));
  m.set_trial_timeout_s(NAN);
  EXPECT_THAT(ErrorOf(spec), StartsWith("measurement.trial_timeout_s: nan"));
  m.set_trial_timeout_s(86400);
  m.set_max_attempts(11);
  EXPECT_EQ(ErrorOf(spec),
            "measurement.max_attempts: 11 is out of range; allowed: 1..10 (0 "
            "= default 3)");
  m.set_max_attempts(10);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok());
}

TEST(ValidateTest, FirstErrorInFieldOrder) {
  v1::SweepSpec spec = Base();
  spec.mutable_measurement()->set_iterations(-1);
  spec.mutable_strategy()->set_max_trials(-1);
  EXPECT_THAT(ErrorOf(spec), StartsWith("strategy.max_trials:"));
  spec.mutable_space()->add_tp(3);
  EXPECT_THAT(ErrorOf(spec), StartsWith("space.tp[0]:"));
  spec.mutable_space()->add_moe_backends("foo");
  EXPECT_THAT(ErrorOf(spec), StartsWith("space.moe_backends[2]:"));
  spec.mutable_workload()->set_region(static_cast<v1::Region>(5));  // field 7
  EXPECT_THAT(ErrorOf(spec), StartsWith("workload.region:"));
  spec.mutable_workload()->set_batch_sizes(0, 0);
  EXPECT_THAT(ErrorOf(spec), StartsWith("workload.batch_sizes[0]:"));
  spec.mutable_workload()->set_model_preset("nope");
  EXPECT_THAT(ErrorOf(spec), StartsWith("workload.model_preset:"));
}

// ------------------------------------------------ quantization, KV dtype --

v1::SweepSpec StepBase() {
  v1::SweepSpec spec = Base();
  spec.mutable_workload()->set_region(v1::DECODE_STEP);
  return spec;
}

TEST(ValidateTest, QuantizationAcceptedForTheDecodeStep) {
  v1::SweepSpec spec = StepBase();
  v1::QuantizationMap& q = *spec.mutable_workload()->mutable_quantization();
  q.set_attention(v1::NVFP4);
  q.set_dense_mlp(v1::BF16);
  q.set_lm_head(v1::NVFP4);
  q.set_routed_experts(v1::NVFP4);
  q.set_shared_expert(v1::NVFP4);
  spec.mutable_workload()->add_kv_cache_dtypes(v1::KV_BF16);
  spec.mutable_workload()->add_kv_cache_dtypes(v1::KV_FP8_E4M3);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
}

TEST(ValidateTest, MoeWeightsAreNvfp4Only) {
  v1::SweepSpec spec = StepBase();
  spec.mutable_workload()->mutable_quantization()->set_routed_experts(v1::BF16);
  EXPECT_EQ(ErrorOf(spec),
            "workload.quantization.routed_experts: BF16 is not allowed; "
            "allowed: NVFP4 (the MoE backends are NVFP4 kernels)");
  spec = StepBase();
  spec.mutable_workload()->mutable_quantization()->set_shared_expert(v1::BF16);
  EXPECT_THAT(ErrorOf(spec),
              StartsWith("workload.quantization.shared_expert: BF16 is not "
                         "allowed; allowed: NVFP4"));
}

TEST(ValidateTest, UnknownPrecisionNamesTheAllowedValues) {
  v1::SweepSpec spec = StepBase();
  spec.mutable_workload()->mutable_quantization()->set_lm_head(
      static_cast<v1::Precision>(7));
  EXPECT_EQ(ErrorOf(spec),
            "workload.quantization.lm_head: 7 is not allowed; allowed: NVFP4, "
            "BF16");
}

TEST(ValidateTest, MoeLayerRefusesANonDefaultMap) {
  v1::SweepSpec spec = Base();  // region MOE_LAYER
  spec.mutable_workload()->mutable_quantization()->set_attention(v1::NVFP4);
  EXPECT_THAT(ErrorOf(spec), AllOf(StartsWith("workload.quantization: "),
                                   HasSubstr("allowed: the default (unset)"),
                                   HasSubstr("DECODE_STEP")));
  // The defaults, spelt out, are the default.
  spec = Base();
  spec.mutable_workload()->mutable_quantization()->set_attention(v1::BF16);
  spec.mutable_workload()->mutable_quantization()->set_routed_experts(
      v1::NVFP4);
  spec.mutable_workload()->add_kv_cache_dtypes(v1::KV_BF16);
  EXPECT_TRUE(ValidateSweepSpec(spec).ok()) << ValidateSweepSpec(spec);
}

TEST(ValidateTest, KvCacheDtypes) {
  v1::SweepSpec spec = Base();  // region MOE_LAYER
  spec.mutable_workload()->add_kv_cache_dtypes(v1::KV_FP8_E4M3);
  EXPECT_THAT(ErrorOf(spec),
              AllOf(StartsWith("workload.kv_cache_dtypes[0]: KV_FP8_E4M3"),
                    HasSubstr("allowed: KV_BF16")));
  spec = StepBase();
  spec.mutable_workload()->mutable_kv_cache_dtypes()->Add(9);
  EXPECT_EQ(ErrorOf(spec),
            "workload.kv_cache_dtypes[0]: 9 is not allowed; allowed: KV_BF16, "
            "KV_FP8_E4M3");
  spec = StepBase();
  spec.mutable_workload()->add_kv_cache_dtypes(v1::KV_BF16);
  spec.mutable_workload()->add_kv_cache_dtypes(
      v1::KV_CACHE_DTYPE_UNSPECIFIED);  // the same workload
  EXPECT_THAT(ErrorOf(spec),
              StartsWith("workload.kv_cache_dtypes[1]: KV_BF16 is repeated"));
}

}  // namespace
}  // namespace moetune::tuner
