#include "worker/trial_runner.h"

#include <cmath>
#include <functional>
#include <limits>

#include "common/clock.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backends/cpu/cpu_registry.h"
#include "kernels/backends/registry.h"
#include "kernels/reference/decode_step.h"
#include "kernels/reference/model_weights.h"
#include "kernels/reference/ops.h"
#include "kernels/reference/router.h"
#include "kernels/reference/step_bytes.h"
#include "tests/kernels/reference/kept_tie.h"
#include "tests/worker/fakes.h"
#include "worker/cpu_backend.h"
#include "worker/gpu_backend.h"

namespace moetune::worker {
namespace {

// The worker side of a CPU backend of the registry.
std::unique_ptr<Backend> CpuBackend(const char* name) {
  return MakeCpuBackend(*backends::FindBackend(name),
                        backends::FindCpuMoe(name), RealClock::Get());
}

using ::testing::HasSubstr;

// A backend whose run is scripted by the test.
class ScriptedBackend final : public Backend {
 public:
  explicit ScriptedBackend(absl::StatusOr<BackendRun> run)
      : run_(std::move(run)) {}
  const backends::BackendDescriptor& descriptor() const override {
    return *backends::FindBackend("fused_gemv");
  }
  v1::BackendProbe Probe(const DeviceTarget&) override { return {}; }
  absl::StatusOr<BackendRun> Run(const TrialInputs&) override { return run_; }

 private:
  absl::StatusOr<BackendRun> run_;
};

v1::TrialExecution Execution(const std::string& backend, v1::Region region,
                             int batch = 2) {
  v1::TrialExecution execution;
  v1::Trial* trial = execution.mutable_trial();
  trial->set_trial_id(17);
  trial->set_attempt(2);
  trial->mutable_workload()->set_model_preset("tiny");
  trial->mutable_workload()->set_batch_size(batch);
  trial->mutable_workload()->set_context_length(32);
  trial->mutable_workload()->set_seed(5);
  trial->mutable_workload()->set_region(region);
  trial->mutable_config()->set_moe_backend(backend);
  trial->mutable_config()->mutable_tile()->set_block_n(8);
  trial->mutable_config()->mutable_tile()->set_block_k(128);
  trial->mutable_config()->set_tp(1);
  trial->mutable_config()->set_ep(1);
  trial->mutable_measurement()->set_warmup_iterations(1);
  trial->mutable_measurement()->set_iterations(5);
  execution.mutable_probe()->mutable_device()->set_measured_read_gbps(10.0);
  execution.mutable_probe()->mutable_fingerprint()->set_hash("fp1");
  execution.set_device_ordinal(-1);
  return execution;
}

BackendRun Scripted(std::vector<float> output, std::vector<float> reference) {
  BackendRun run;
  run.output = std::move(output);
  run.reference = std::move(reference);
  run.samples_us = {10, 12, 11, 13, 9};
  run.bytes = 1e6;  // 1 MB at 10 GB/s = 100 us
  return run;
}

TEST(TrialRunnerTest, CpuBackendsAreCorrectAndTimedOnBothRegions) {
  FakeClock unused;
  BackendRegistry registry;
  registry.Register(CpuBackend("cpu_reference"));
  registry.Register(CpuBackend("cpu_blocked"));
  TrialRunner runner(&registry);
  for (const char* backend : {"cpu_reference", "cpu_blocked"}) {
    for (v1::Region region : {v1::MOE_LAYER, v1::DECODE_STEP}) {
      const v1::TrialResult r = runner.Run(Execution(backend, region));
      EXPECT_EQ(r.outcome(), v1::DONE) << backend << " " << r.reason();
      EXPECT_EQ(r.trial_id(), 17);
      EXPECT_EQ(r.attempt(), 2);
      EXPECT_EQ(r.samples_us_size(), 5);
      EXPECT_EQ(r.stats().samples(), 5);
      EXPECT_GT(r.stats().median_us(), 0);
      EXPECT_LE(r.max_rel_error(), 1e-4);
      EXPECT_GT(r.roofline().bytes(), 0);
      EXPECT_FALSE(r.roofline().comm_modelled());
      EXPECT_EQ(r.fingerprint().hash(), "fp1");
      EXPECT_GT(r.check_s(), 0);  // the untimed run and the CPU reference
      EXPECT_GT(r.timed_s(), 0);
    }
  }
}

// The backend's phases reach the result; the runner adds the time of a
// reference it computes itself (none here: the backend brought one).
TEST(TrialRunnerTest, TheResultSaysHowLongTheChecksAndTheTimingTook) {
  BackendRun run = Scripted({1, 2, 3, 4}, {1, 2, 3, 4});
  run.check_s = 0.25;
  run.timed_s = 1.5;
  BackendRegistry registry;
  registry.Register(std::make_unique<ScriptedBackend>(run));
  FakeClock clock;
  TrialRunner runner(&registry, nullptr, &clock);
  const v1::TrialResult r = runner.Run(Execution("fused_gemv", v1::MOE_LAYER));
  EXPECT_EQ(r.outcome(), v1::DONE) << r.reason();
  EXPECT_DOUBLE_EQ(r.check_s(), 0.25);
  EXPECT_DOUBLE_EQ(r.timed_s(), 1.5);
}

// The workload's formats reach the step: ResolveStep maps the map and the
// KV dtype (unset = the defaults), the CPU backends run the step in them
// (checked against the reference in the same formats), and the floor's
// bytes follow them.
TEST(TrialRunnerTest, CpuBackendsRunTheWorkloadsFormats) {
  BackendRegistry registry;
  registry.Register(CpuBackend("cpu_reference"));
  registry.Register(CpuBackend("cpu_blocked"));
  TrialRunner runner(&registry);
  const v1::TrialExecution plain = Execution("cpu_blocked", v1::DECODE_STEP);
  const ref::StepSpec defaults = *ResolveStep(plain.trial());
  EXPECT_TRUE(defaults.quantization == ref::Quantization{});
  EXPECT_EQ(defaults.kv_cache, ref::KvCacheDtype::kBf16);
  v1::TrialExecution formats = plain;
  v1::Workload& w = *formats.mutable_trial()->mutable_workload();
  w.mutable_quantization()->set_attention(v1::NVFP4);
  w.mutable_quantization()->set_lm_head(v1::NVFP4);
  w.mutable_quantization()->set_dense_mlp(v1::BF16);
  w.set_kv_cache_dtype(v1::KV_FP8_E4M3);
  const ref::StepSpec step = *ResolveStep(formats.trial());
  EXPECT_EQ(step.quantization.attention, ref::Precision::kNvfp4);
  EXPECT_EQ(step.quantization.lm_head, ref::Precision::kNvfp4);
  EXPECT_EQ(step.quantization.dense_mlp, ref::Precision::kBf16);
  EXPECT_EQ(step.kv_cache, ref::KvCacheDtype::kFp8E4M3);
  const v1::TrialResult base = runner.Run(plain);
  for (const char* backend : {"cpu_reference", "cpu_blocked"}) {
    formats.mutable_trial()->mutable_config()->set_moe_backend(backend);
    const v1::TrialResult r = runner.Run(formats);
    EXPECT_EQ(r.outcome(), v1::DONE) << backend << " " << r.reason();
    EXPECT_LE(r.max_rel_error(), 1e-4);
    EXPECT_DOUBLE_EQ(r.roofline().bytes(),
                     static_cast<double>(ref::DecodeStepBytes(step)));
    EXPECT_LT(r.roofline().bytes(), base.roofline().bytes());
  }
}

TEST(TrialRunnerTest, RooflineIsBytesOverMeasuredBandwidth) {
  BackendRegistry registry;
  registry.Register(
      std::make_unique<ScriptedBackend>(Scripted({1, 2, 3}, {1, 2, 3})));
  TrialRunner runner(&registry);
  const v1::TrialResult r = runner.Run(Execution("fused_gemv", v1::MOE_LAYER));
  ASSERT_EQ(r.outcome(), v1::DONE) << r.reason();
  EXPECT_DOUBLE_EQ(r.stats().median_us(), 11);
  EXPECT_DOUBLE_EQ(r.roofline().floor_us(), 100);
  EXPECT_DOUBLE_EQ(r.roofline().efficiency(), 100.0 / 11.0);
}

TEST(TrialRunnerTest, WrongOutputIsIncorrectNeverFast) {
  BackendRegistry registry;
  registry.Register(
      std::make_unique<ScriptedBackend>(Scripted({1, 2, 4}, {1, 2, 3})));
  TrialRunner runner(&registry);
  const v1::TrialResult r = runner.Run(Execution("fused_gemv", v1::MOE_LAYER));
  EXPECT_EQ(r.outcome(), v1::INCORRECT);
  EXPECT_NEAR(r.max_rel_error(), 1 / std::sqrt(14.0), 1e-9);
  EXPECT_DOUBLE_EQ(r.error_bound(), 2e-2);
  EXPECT_THAT(r.reason(), HasSubstr("exceeds the bound"));
}

// A chain of layers: a wrong layer fails the trial even when the error of
// the whole concatenation would stay under the bound.
TEST(TrialRunnerTest, EveryChainedLayerIsCheckedOnItsOwn) {
  std::vector<float> ref(400, 1.0f), out = ref;
  out[350] = 1.3f;  // layer 4 of 4: 0.03 relative; over all 400: 0.015
  BackendRun run = Scripted(out, ref);
  run.layers = 4;
  BackendRegistry registry;
  registry.Register(std::make_unique<ScriptedBackend>(run));
  TrialRunner runner(&registry);
  v1::TrialResult r = runner.Run(Execution("fused_gemv", v1::MOE_LAYER));
  EXPECT_EQ(r.outcome(), v1::INCORRECT);
  EXPECT_NEAR(r.max_rel_error(), 0.03, 1e-6);
  EXPECT_LT(RelativeL2Error(out, ref), r.error_bound());
  EXPECT_THAT(r.reason(), HasSubstr("(layer 4 of the chain of 4)"));
  run.output = ref;
  BackendRegistry fine;
  fine.Register(std::make_unique<ScriptedBackend>(run));
  r = TrialRunner(&fine).Run(Execution("fused_gemv", v1::MOE_LAYER));
  EXPECT_EQ(r.outcome(), v1::DONE) << r.reason();
}

TEST(WorstLayerErrorTest, TheWorstBlockAndItsIndex) {
  int layer = -1;
  EXPECT_DOUBLE_EQ(WorstLayerError({3, 4, 3, 5}, {3, 4, 3, 4}, 2, &layer),
                   1.0 / 5.0);
  EXPECT_EQ(layer, 1);
  EXPECT_DOUBLE_EQ(WorstLayerError({3, 4}, {3, 4}, 1, &layer), 0);
  EXPECT_EQ(layer, 0);
  EXPECT_TRUE(std::isinf(WorstLayerError({1, 2, 3}, {1, 2, 3}, 2, &layer)));
  EXPECT_TRUE(std::isinf(WorstLayerError({1, 2}, {1, 2, 3, 4}, 2, &layer)));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(
      std::isinf(WorstLayerError({1, nan, 3, 4}, {1, 2, 3, 4}, 2, &layer)));
  EXPECT_EQ(layer, 0);
}

TEST(TrialRunnerTest, NanOrMissingOutputIsIncorrect) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::vector<float> output :
       {std::vector<float>{1, nan, 3}, std::vector<float>{1, 2}}) {
    BackendRegistry registry;
    registry.Register(
        std::make_unique<ScriptedBackend>(Scripted(output, {1, 2, 3})));
    TrialRunner runner(&registry);
    EXPECT_EQ(runner.Run(Execution("fused_gemv", v1::MOE_LAYER)).outcome(),
              v1::INCORRECT);
  }
}

TEST(TrialRunnerTest, BackendErrorsAndUnknownNamesAreFailures) {
  BackendRegistry registry;
  registry.Register(std::make_unique<ScriptedBackend>(
      absl::FailedPreconditionError("kernel cannot do this shape: 5x7")));
  TrialRunner runner(&registry);
  v1::TrialResult r = runner.Run(Execution("fused_gemv", v1::MOE_LAYER));
  EXPECT_EQ(r.outcome(), v1::FAILED);
  EXPECT_THAT(r.reason(), HasSubstr("cannot do this shape"));
  r = runner.Run(Execution("warp_drive", v1::MOE_LAYER));
  EXPECT_EQ(r.outcome(), v1::FAILED);
  EXPECT_THAT(r.reason(), HasSubstr("unknown backend 'warp_drive'"));
}

TEST(TrialRunnerTest, ShardedTrialsCarryAModelledCommFloor) {
  BackendRegistry registry;
  registry.Register(CpuBackend("cpu_blocked"));
  TrialRunner runner(&registry);
  v1::TrialExecution execution = Execution("cpu_blocked", v1::MOE_LAYER);
  execution.mutable_trial()->mutable_config()->set_ep(2);
  const v1::TrialResult r = runner.Run(execution);
  ASSERT_EQ(r.outcome(), v1::DONE) << r.reason();
  EXPECT_TRUE(r.roofline().comm_modelled());
  EXPECT_GT(r.roofline().comm_floor_us(), 0);
  // The median holds no communication: the efficiency leaves it out too.
  EXPECT_DOUBLE_EQ(r.roofline().efficiency(),
                   (r.roofline().floor_us() - r.roofline().comm_floor_us()) /
                       r.stats().median_us());
}

// The config's attention reaches the rank's shard: ATTENTION_DP sets
// dp_attention, ATTENTION_TP and unset do not.
TEST(TrialRunnerTest, ResolveStepMapsTheAttention) {
  v1::Trial trial = Execution("fused_gemv", v1::DECODE_STEP, 4).trial();
  trial.mutable_config()->set_tp(2);
  EXPECT_FALSE(ResolveStep(trial)->shard.dp_attention);
  trial.mutable_config()->set_attention_split(v1::ATTENTION_TP);
  EXPECT_FALSE(ResolveStep(trial)->shard.dp_attention);
  trial.mutable_config()->set_attention_split(v1::ATTENTION_DP);
  trial.mutable_config()->set_all_reduce_impl(v1::ALL_REDUCE_NCCL);
  const absl::StatusOr<ref::StepSpec> step = ResolveStep(trial);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(step->shard.dp_attention);
  EXPECT_EQ(step->shard.tp, 2);
  EXPECT_EQ(step->batch, 4);
  // The one-shot kernel does dp's all-gather and reduce-scatter too.
  trial.mutable_config()->set_all_reduce_impl(v1::ALL_REDUCE_ONESHOT);
  EXPECT_TRUE(ResolveStep(trial)->shard.dp_attention);
}

TEST(TrialRunnerTest, ResolveStepRefusesAnAttentionItCannotRun) {
  v1::Trial trial = Execution("fused_gemv", v1::DECODE_STEP, 4).trial();
  trial.mutable_config()->set_tp(2);
  trial.mutable_config()->set_attention_split(
      static_cast<v1::AttentionSplit>(7));
  absl::Status status = ResolveStep(trial).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_EQ(status.message(),
            "config.attention_split: 7 is not allowed; allowed: ATTENTION_TP, "
            "ATTENTION_DP");
  trial.mutable_config()->set_attention_split(v1::ATTENTION_DP);
  trial.mutable_workload()->set_region(v1::MOE_LAYER);
  status = ResolveStep(trial).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("config.attention_split: ATTENTION_DP splits a decode "
                        "step's batch over the ranks; with region MOE_LAYER "
                        "allowed: ATTENTION_TP"));
  // A trial with such a config fails with the reason, never runs; so does
  // one whose legacy string (from a coordinator that writes them) names no
  // value.
  BackendRegistry registry;
  registry.Register(
      std::make_unique<ScriptedBackend>(Scripted({1, 2, 3}, {1, 2, 3})));
  TrialRunner runner(&registry);
  v1::TrialExecution execution = Execution("fused_gemv", v1::DECODE_STEP, 4);
  execution.mutable_trial()->mutable_config()->set_attention("ring");
  const v1::TrialResult r = runner.Run(execution);
  EXPECT_EQ(r.outcome(), v1::FAILED);
  EXPECT_THAT(r.reason(), HasSubstr("config.attention: 'ring'"));
}

// tiny's step (4 layers, 1 dense, hidden 256) at batch 4 over tp 2 with dp
// attention: 3 MoE layers, each an all-gather of the BF16 input and a
// reduce-scatter of the FP32 output, [4][256], half of each over the link,
// at the assumed NCCL latency (17 us) and bus bandwidth (360 GB/s). The
// attention in its legacy spelling, as a coordinator that writes it sends
// it: the runner reads it as the enum.
TEST(TrialRunnerTest, DpAttentionTrialsModelItsGathersAndScatters) {
  BackendRegistry registry;
  registry.Register(
      std::make_unique<ScriptedBackend>(Scripted({1, 2, 3}, {1, 2, 3})));
  TrialRunner runner(&registry);
  v1::TrialExecution execution = Execution("fused_gemv", v1::DECODE_STEP, 4);
  execution.mutable_trial()->mutable_config()->set_tp(2);
  execution.mutable_trial()->mutable_config()->set_attention("dp");
  const v1::TrialResult dp = runner.Run(execution);
  ASSERT_EQ(dp.outcome(), v1::DONE) << dp.reason();
  EXPECT_TRUE(dp.roofline().comm_modelled());
  EXPECT_DOUBLE_EQ(dp.roofline().comm_floor_us(),
                   3 * (17.0 + 1024 / 360e3) + 3 * (17.0 + 2048 / 360e3));
  EXPECT_DOUBLE_EQ(dp.roofline().floor_us(),
                   100 + dp.roofline().comm_floor_us());
  // tp attention: 8 sums of 4096 bytes and the token gather of 64.
  execution.mutable_trial()->mutable_config()->set_attention("tp");
  const v1::TrialResult tp = runner.Run(execution);
  ASSERT_EQ(tp.outcome(), v1::DONE) << tp.reason();
  EXPECT_DOUBLE_EQ(tp.roofline().comm_floor_us(),
                   8 * (17.0 + 4096 / 360e3) + 17.0 + 64 / 360e3);
}

// A dp trial runs on the CPU backends as rank 0 of its world (its own 2 of
// the 4 sequences, attention whole), checked against the reference of the
// same rank; its floor's bytes are that rank's. A batch that does not split
// over the ranks fails with the reference's reason.
TEST(TrialRunnerTest, CpuBackendsRunDataParallelAttention) {
  BackendRegistry registry;
  registry.Register(CpuBackend("cpu_reference"));
  registry.Register(CpuBackend("cpu_blocked"));
  TrialRunner runner(&registry);
  for (const char* backend : {"cpu_reference", "cpu_blocked"}) {
    v1::TrialExecution execution = Execution(backend, v1::DECODE_STEP, 4);
    execution.mutable_trial()->mutable_config()->set_ep(2);  // 8x128 at tp 1
    const v1::TrialResult tp = runner.Run(execution);
    ASSERT_EQ(tp.outcome(), v1::DONE) << backend << " " << tp.reason();
    execution.mutable_trial()->mutable_config()->set_attention_split(
        v1::ATTENTION_DP);
    const ref::StepSpec step = *ResolveStep(execution.trial());
    const v1::TrialResult dp = runner.Run(execution);
    ASSERT_EQ(dp.outcome(), v1::DONE) << backend << " " << dp.reason();
    EXPECT_LE(dp.max_rel_error(), 1e-4) << backend;
    EXPECT_TRUE(dp.roofline().comm_modelled());
    EXPECT_DOUBLE_EQ(dp.roofline().bytes(),
                     static_cast<double>(ref::DecodeStepBytes(step)));
    EXPECT_NE(dp.roofline().bytes(), tp.roofline().bytes()) << backend;
    execution.mutable_trial()->mutable_workload()->set_batch_size(3);
    const v1::TrialResult odd = runner.Run(execution);
    EXPECT_EQ(odd.outcome(), v1::FAILED) << backend;
    EXPECT_THAT(odd.reason(), HasSubstr("step.batch")) << backend;
  }
}

// The batches cpu_reference's MoE layers were called with, by
// RecordingCpuMoe (a MoeFactory is a plain function: the record is static).
std::vector<int>& MoeBatches() {
  static std::vector<int> batches;
  return batches;
}

absl::StatusOr<ref::MoeFn> RecordingCpuMoe(const ref::StepSpec& step,
                                           const backends::Tile& tile) {
  ASSIGN_OR_RETURN(ref::MoeFn moe,
                   backends::FindCpuMoe("cpu_reference")(step, tile));
  return ref::MoeFn([moe](int layer, const float* x, int batch, float* y) {
    MoeBatches().push_back(batch);
    return moe(layer, x, batch, y);
  });
}

// A CPU worker's data-parallel rank computes every rank's tokens in its MoE
// layers (synthetic peers, as the GPU step does), so its time is the load
// its floor counts; its own logits are still the reference's.
TEST(TrialRunnerTest, CpuDataParallelMoeLayersComputeTheWholeBatch) {
  BackendRegistry registry;
  registry.Register(MakeCpuBackend(*backends::FindBackend("cpu_reference"),
                                   &RecordingCpuMoe, RealClock::Get()));
  TrialRunner runner(&registry);
  v1::TrialExecution execution = Execution("cpu_reference", v1::DECODE_STEP, 4);
  execution.mutable_trial()->mutable_config()->set_ep(2);
  execution.mutable_trial()->mutable_config()->set_attention_split(
      v1::ATTENTION_DP);
  MoeBatches().clear();
  const v1::TrialResult dp = runner.Run(execution);
  ASSERT_EQ(dp.outcome(), v1::DONE) << dp.reason();
  EXPECT_LE(dp.max_rel_error(), 1e-4);
  ASSERT_FALSE(MoeBatches().empty());
  for (int batch : MoeBatches()) EXPECT_EQ(batch, 4);
  MoeBatches().clear();
  execution.mutable_trial()->mutable_config()->set_attention_split(
      v1::ATTENTION_TP);
  ASSERT_EQ(runner.Run(execution).outcome(), v1::DONE);
  for (int batch : MoeBatches()) EXPECT_EQ(batch, 4);
}

// A MoE layer's input [batch][hidden] rounded to BF16, as the GPU reads it.
std::vector<float> Bf16Rounded(const float* x, int batch, int hidden) {
  std::vector<float> in(x, x + static_cast<size_t>(batch) * hidden);
  for (float& v : in) v = ref::RoundToBf16(v);
  return in;
}

// Every MoE layer's routes of a BF16-input reference step, flat [MoE
// layer][token][k] as the GPU step reports them, with the first token of
// the first MoE layer near a tie (its runner-up within the carried-BF16
// tolerance of its k-th expert) given that runner-up instead: what a GPU
// breaking that tie the other way would report. Empty when no token is.
std::vector<int> RoutesWithATieBrokenTheOtherWay(const ref::StepSpec& spec) {
  std::vector<int> flat;
  bool swapped = false;
  const int k = spec.config.experts_per_token;
  const ref::MoeFn plain = ref::Bf16InputReferenceMoe(spec);
  const ref::MoeFn record = [&](int layer, const float* x, int batch,
                                float* y) {
    const std::vector<float> in = Bf16Rounded(x, batch, spec.config.hidden);
    const std::vector<float> logits =
        ref::RouterLogitsBatch(spec, layer, in.data(), batch);
    const std::vector<float> bias = ref::RouterBias(spec, layer);
    for (const ref::Route& r : ref::RouteBatch(spec, layer, in.data(), batch)) {
      const size_t token = (flat.size() / k) % batch;
      flat.insert(flat.end(), r.experts.begin(), r.experts.end());
      if (swapped) continue;
      flat.back() =
          ref::RouteToken(&logits[token * spec.config.num_experts], bias.data(),
                          spec.config.num_experts, k + 1, 1.0f)
              .experts[k];
      const ref::Route near = ref::RouteBatchNear(
          spec, layer, &in[token * spec.config.hidden], 1,
          &flat[flat.size() - k], ref::kCarriedBf16RouteTolerance)[0];
      swapped = near.experts == std::vector<int>(flat.end() - k, flat.end());
      if (!swapped)
        std::copy(r.experts.begin(), r.experts.end(), flat.end() - k);
    }
    return plain(layer, x, batch, y);
  };
  if (!ref::DecodeStep(spec, record).ok() || !swapped) return {};
  return flat;
}

// A layer's kept sets appended to a run's report as the GPU step lists them:
// rows of index_topk (padded with -1) and each row's count.
void AppendKeptSets(const std::vector<std::vector<int>>& sets, int index_topk,
                    BackendRun* run) {
  for (const std::vector<int>& set : sets) {
    run->kept_tokens.insert(run->kept_tokens.end(), set.begin(), set.end());
    run->kept_tokens.resize(run->kept_tokens.size() + index_topk - set.size(),
                            -1);
    run->kept_counts.push_back(static_cast<int>(set.size()));
  }
}

// The trial of `run` (a GPU step whose output follows the choices it
// reports) is DONE with no error; with the choices taken out of the report
// (`unreport`) it is judged against the reference's own choices and
// differs; with them of the wrong size (`malform`) it fails naming `what`.
void ExpectFollowedOnlyWhereReported(
    const v1::TrialExecution& execution, const BackendRun& run,
    const std::function<void(BackendRun*)>& unreport,
    const std::function<void(BackendRun*)>& malform, const std::string& what) {
  BackendRun unreported = run, malformed = run;
  unreport(&unreported);
  malform(&malformed);
  const auto judged = [&](const BackendRun& r) {
    BackendRegistry registry;
    registry.Register(std::make_unique<ScriptedBackend>(r));
    return TrialRunner(&registry).Run(execution);
  };
  v1::TrialResult result = judged(run);
  ASSERT_EQ(result.outcome(), v1::DONE) << result.reason();
  EXPECT_EQ(result.max_rel_error(), 0);
  EXPECT_GT(judged(unreported).max_rel_error(), 0);
  result = judged(malformed);
  EXPECT_EQ(result.outcome(), v1::FAILED);
  EXPECT_THAT(result.reason(),
              HasSubstr("the reference could not be computed: " + what));
}

// A GPU step that reports its router choices is checked against the
// reference following them where they are near its own top-k: a tie broken
// the other way costs nothing, while the plain reference differs; routes of
// the wrong size fail the trial with a reason.
TEST(TrialRunnerTest, GpuStepsAreCheckedFollowingTheirRoutingNearATie) {
  v1::TrialExecution execution = Execution("fused_gemv", v1::DECODE_STEP, 11);
  execution.set_device_ordinal(0);
  const ref::StepSpec spec = *ResolveStep(execution.trial());
  BackendRun run = Scripted({}, {});
  run.chosen_experts = RoutesWithATieBrokenTheOtherWay(spec);
  ASSERT_FALSE(run.chosen_experts.empty()) << "no near tie in this step";
  const absl::StatusOr<ref::ProposedRoutes> routes =
      ref::MoeLayerRoutes(spec, run.chosen_experts);
  ASSERT_TRUE(routes.ok()) << routes.status();
  run.output = *ref::DecodeStep(
      spec, ref::Bf16InputReferenceMoe(spec, &*routes,
                                       ref::kCarriedBf16RouteTolerance));
  ExpectFollowedOnlyWhereReported(
      execution, run, [](BackendRun* r) { r->chosen_experts.clear(); },
      [](BackendRun* r) { r->chosen_experts.pop_back(); }, "routes: ");
}

// The same for the indexers' kept sets: a near-tie broken the other way
// (tiny's scores tie at zero where ReLU removes every head's term) costs
// nothing when the run reports its kept sets; counts of the wrong size fail
// the trial with a reason.
TEST(TrialRunnerTest, GpuStepsAreCheckedFollowingTheirKeptSetsNearATie) {
  v1::TrialExecution execution = Execution("fused_gemv", v1::DECODE_STEP, 7);
  execution.set_device_ordinal(0);
  v1::Workload& w = *execution.mutable_trial()->mutable_workload();
  w.set_context_length(256);
  w.set_layers(1);
  w.set_seed(21);
  w.mutable_quantization()->set_attention(v1::NVFP4);
  const ref::StepSpec spec = *ResolveStep(execution.trial());
  ref::StepTrace traced;
  ASSERT_TRUE(ref::DecodeStepTraced(spec, &traced).ok());
  const ref::LayerTrace& t = traced.layers[0];
  const float tol = ref::kCarriedBf16KeptTolerance;
  const ref::testing::KeptTie tie = ref::testing::FindKeptTie(t, tol);
  ASSERT_GE(tie.sequence, 0) << "no near tie in this step";
  ref::ProposedKept kept = {t.kept};
  kept[0][tie.sequence] = ref::testing::SwappedKept(t, tie.sequence, tie.tie);
  BackendRun run = Scripted({}, {});
  AppendKeptSets(kept[0], spec.config.index_topk, &run);
  run.output = *ref::DecodeStepFollowingKept(
      spec, ref::Bf16InputReferenceMoe(spec), kept, tol);
  ExpectFollowedOnlyWhereReported(
      execution, run,
      [](BackendRun* r) {
        r->kept_tokens.clear();
        r->kept_counts.clear();
      },
      [](BackendRun* r) { r->kept_counts.pop_back(); }, "kept sets: ");
}

// Under data-parallel attention (one GPU, the other ranks modelled) the GPU
// step routes every rank's tokens in each MoE layer, rank 0's first, and
// reports the kept sets of its own sequences: the check takes rank 0's own
// routes and follows them (the reference's own choices here: no error).
TEST(TrialRunnerTest, GpuDataParallelStepsFollowTheirOwnTokensChoices) {
  v1::TrialExecution execution = Execution("fused_gemv", v1::DECODE_STEP, 4);
  execution.set_device_ordinal(0);
  execution.mutable_trial()->mutable_config()->set_ep(2);
  execution.mutable_trial()->mutable_config()->set_attention_split(
      v1::ATTENTION_DP);
  const ref::StepSpec spec = *ResolveStep(execution.trial());
  const int own = ref::OwnBatch(spec.shard, spec.batch);  // 2 sequences
  const int k = spec.config.experts_per_token;
  BackendRun run = Scripted({}, {});
  const ref::MoeFn plain = ref::Bf16InputReferenceMoe(spec);
  const ref::MoeFn record = [&](int layer, const float* x, int batch,
                                float* y) {
    const std::vector<float> in = Bf16Rounded(x, batch, spec.config.hidden);
    std::vector<int> mine;
    for (const ref::Route& r : ref::RouteBatch(spec, layer, in.data(), batch)) {
      mine.insert(mine.end(), r.experts.begin(), r.experts.end());
    }
    EXPECT_EQ(mine.size(), static_cast<size_t>(own) * k);
    for (int rank = 0; rank < ref::World(spec.shard); ++rank) {
      // The other rank's rows: any experts (its tokens are not checked).
      run.chosen_experts.insert(run.chosen_experts.end(), mine.begin(),
                                mine.end());
    }
    return plain(layer, x, batch, y);
  };
  run.output = *ref::DecodeStep(spec, record);
  ref::StepTrace traced;
  ASSERT_TRUE(ref::DecodeStepTraced(spec, &traced).ok());
  for (const ref::LayerTrace& layer : traced.layers) {
    ASSERT_EQ(layer.kept.size(), static_cast<size_t>(own));
    AppendKeptSets(layer.kept, spec.config.index_topk, &run);
  }

  BackendRegistry registry;
  registry.Register(std::make_unique<ScriptedBackend>(run));
  const v1::TrialResult result = TrialRunner(&registry).Run(execution);
  ASSERT_EQ(result.outcome(), v1::DONE) << result.reason();
  EXPECT_EQ(result.max_rel_error(), 0);
}

TEST(RelativeL2ErrorTest, HandComputed) {
  EXPECT_DOUBLE_EQ(RelativeL2Error({3, 4}, {3, 4}), 0);
  EXPECT_DOUBLE_EQ(RelativeL2Error({3, 5}, {3, 4}), 1.0 / 5.0);
  EXPECT_TRUE(std::isinf(RelativeL2Error({}, {})));
}

TEST(GpuBackendTest, AdaptsTheTrialAndMapsStatuses) {
  FakeGpuApi gpu;
  std::unique_ptr<Backend> backend =
      MakeGpuBackend(*backends::FindBackend("fused_gemv"), &gpu);
  TrialInputs in;
  in.trial = Execution("fused_gemv", v1::MOE_LAYER, 3).trial();
  in.trial.mutable_config()->set_cuda_graph(true);
  in.step = *ResolveStep(in.trial);
  in.target = DeviceTarget{0};
  gpu.next_run.status = gpu::RunStatus::kOk;
  gpu.next_run.output = {1, 2};
  gpu.next_run.samples_us = {5, 6};
  absl::StatusOr<BackendRun> run = backend->Run(in);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(gpu.last_problem.batch, 3);
  EXPECT_EQ(gpu.last_problem.dims.hidden, 256);
  EXPECT_EQ(gpu.last_problem.input.size(), 3u * 256);
  EXPECT_EQ(gpu.last_problem.router_bias.size(), 32u);
  EXPECT_EQ(gpu.last_options.tile, (backends::Tile{8, 128}));
  EXPECT_TRUE(gpu.last_options.cuda_graph);
  EXPECT_FALSE(gpu.last_options.compute_reference);  // tiny: CPU reference
  EXPECT_EQ(gpu.last_options.chain_layers, 1);       // unset: one layer
  EXPECT_EQ(run->layers, 1);
  in.trial.mutable_workload()->set_chain_layers(4);
  run = backend->Run(in);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(gpu.last_options.chain_layers, 4);
  EXPECT_EQ(run->layers, 4);
  // A chain's layers are checked against the trusted path, even when tiny.
  EXPECT_TRUE(gpu.last_options.compute_reference);
  gpu.next_run.status = gpu::RunStatus::kCannotImplement;
  EXPECT_EQ(backend->Run(in).status().code(),
            absl::StatusCode::kFailedPrecondition);
  gpu.next_run.status = gpu::RunStatus::kCudaError;
  EXPECT_EQ(backend->Run(in).status().code(), absl::StatusCode::kInternal);
}

// A DECODE_STEP trial runs the rank's whole step: the reference's tokens,
// a router bias for each MoE layer, RoPE at the context's position; the
// floor counts the experts the GPU's routers chose, and their choices and
// kept sets reach the check.
TEST(GpuBackendTest, RunsTheWholeStepOfItsRank) {
  FakeGpuApi gpu;
  std::unique_ptr<Backend> backend =
      MakeGpuBackend(*backends::FindBackend("fused_gemv"), &gpu);
  TrialInputs in;
  in.trial = Execution("fused_gemv", v1::DECODE_STEP, 2).trial();
  in.trial.mutable_config()->set_tp(2);
  in.step = *ResolveStep(in.trial);
  in.target = DeviceTarget{0};
  gpu.next_step.logits = {1, 2, 3, 4};
  gpu.next_step.samples_us = {500, 510};
  gpu.next_step.distinct_experts = std::vector<int>(in.step.layers - 1, 3);
  gpu.next_step.chosen_experts = {7, 3, 5};
  gpu.next_step.kept_tokens = {4, 0, 9};
  gpu.next_step.kept_counts = {2, 1};
  absl::StatusOr<BackendRun> run = backend->Run(in);
  ASSERT_TRUE(run.ok()) << run.status();
  const gpu::StepProblem& p = gpu.last_step;
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.layers, in.step.layers);
  EXPECT_EQ(p.shard.tp, 2);
  ASSERT_EQ(p.tokens.size(), 2u);
  EXPECT_EQ(p.tokens[1], ref::TokenId(in.step, 1));
  EXPECT_EQ(p.router_bias.size(),
            static_cast<size_t>(in.step.layers - p.dims.num_dense_layers));
  EXPECT_EQ(p.router_bias[0],
            ref::RouterBias(in.step, p.dims.num_dense_layers));
  ASSERT_EQ(p.rope_cos.size(), 8u);  // tiny: 16 rope dims
  EXPECT_EQ(p.rope_cos[0], std::cos(static_cast<double>(in.step.context)));
  EXPECT_EQ(p.dims.heads, 4);
  EXPECT_FALSE(p.formats.attention_nvfp4);  // the default map
  EXPECT_FALSE(p.formats.kv_fp8);
  EXPECT_FALSE(gpu.last_step_options.compute_reference);  // tiny: the CPU
  EXPECT_EQ(run->output, gpu.next_step.logits);
  EXPECT_EQ(run->chosen_experts, gpu.next_step.chosen_experts);  // followed
  EXPECT_EQ(run->kept_tokens, gpu.next_step.kept_tokens);
  EXPECT_EQ(run->kept_counts, gpu.next_step.kept_counts);
  EXPECT_EQ(run->bytes,
            static_cast<double>(ref::DecodeStepByteBreakdown(
                                    in.step, gpu.next_step.distinct_experts)
                                    .Total()));
  gpu.next_step.status = gpu::RunStatus::kCannotImplement;
  EXPECT_EQ(backend->Run(in).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// The workload's formats reach the GPU step's problem.
TEST(GpuBackendTest, PassesTheWorkloadsFormats) {
  FakeGpuApi gpu;
  std::unique_ptr<Backend> backend =
      MakeGpuBackend(*backends::FindBackend("fused_gemv"), &gpu);
  TrialInputs in;
  in.trial = Execution("fused_gemv", v1::DECODE_STEP, 2).trial();
  v1::Workload& w = *in.trial.mutable_workload();
  w.mutable_quantization()->set_attention(v1::NVFP4);
  w.mutable_quantization()->set_dense_mlp(v1::BF16);
  w.set_kv_cache_dtype(v1::KV_FP8_E4M3);
  in.step = *ResolveStep(in.trial);
  in.target = DeviceTarget{0};
  gpu.next_step.logits = {1, 2, 3, 4};
  gpu.next_step.samples_us = {500, 510};
  gpu.next_step.distinct_experts = std::vector<int>(in.step.layers - 1, 3);
  ASSERT_TRUE(backend->Run(in).ok());
  const gpu::StepFormats& f = gpu.last_step.formats;
  EXPECT_TRUE(f.attention_nvfp4);
  EXPECT_TRUE(f.dense_bf16);
  EXPECT_FALSE(f.lm_head_nvfp4);
  EXPECT_TRUE(f.kv_fp8);
}

}  // namespace
}  // namespace moetune::worker
