// kernels/cuda/step/step_gpu.h: the GPU decode step against the CPU reference's
// (kernels/reference/decode_step.h) -- the whole tiny model on every GPU
// backend, graph on and off, trivial and sharded ranks; the real GLM-5 dims
// of one dense layer (every non-MoE kernel at its real size, the indexer
// dropping tokens); the trusted-MoE step at real dims; the workload's
// formats (NVFP4 attention and lm_head, BF16 dense MLP, the FP8 latent
// cache) at both sizes. GPU cases skip without a device.
#include "kernels/cuda/step/step_gpu.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backends/registry.h"
#include "kernels/cuda/step/step_problem.h"
#include "kernels/reference/decode_step.h"
#include "kernels/reference/model_weights.h"
#include "kernels/reference/moe_reference.h"
#include "kernels/reference/step_bytes.h"
#include "tests/kernels/cuda/step_kernels_runner.h"

namespace moetune::gpu {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

constexpr double kTolerance = 2e-2;

ref::StepSpec Spec(const std::string& preset, int layers, int batch,
                   int context, ref::Shard shard = {}) {
  ref::StepSpec spec;
  spec.config = *model::FindPreset(preset);
  spec.layers = layers;
  spec.batch = batch;
  spec.context = context;
  spec.seed = 11;
  spec.shard = shard;
  return spec;
}

double RelL2(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
    norm += double{want[i]} * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// Argmax of each row (the lowest index on ties), as token ids.
std::vector<int> ArgMax(const std::vector<float>& logits, int batch,
                        int first_token) {
  const size_t width = logits.size() / batch;
  std::vector<int> out;
  for (int b = 0; b < batch; ++b) {
    const auto row = logits.begin() + b * width;
    out.push_back(first_token +
                  static_cast<int>(std::max_element(row, row + width) - row));
  }
  return out;
}

StepRunOptions Options(const std::string& backend, bool graph) {
  StepRunOptions o;
  o.backend = backend;
  o.cuda_graph = graph;
  o.warmup = 1;
  o.iterations = 2;
  return o;
}

// GPU backends with kernels that this device runs.
std::vector<std::string> RunnableBackends() {
  std::vector<std::string> out;
  for (const backends::BackendDescriptor* b : backends::AllBackends()) {
    if (!b->is_gpu() || !b->gpu.not_implemented.empty()) continue;
    if (ProbeMoeBackend(std::string(b->name), 0).available) {
      out.emplace_back(b->name);
    }
  }
  return out;
}

// Runs the step and checks it against the CPU reference's (its MoE layers
// on BF16 inputs, as the GPU reads them).
void ExpectMatchesReference(const ref::StepSpec& spec,
                            const StepRunOptions& o) {
  const auto want = ref::DecodeStep(spec, ref::Bf16InputReferenceMoe(spec));
  ASSERT_TRUE(want.ok()) << want.status();
  const StepRunResult r = RunDecodeStep(MakeStepProblem(spec), o);
  ASSERT_EQ(r.status, RunStatus::kOk) << o.backend << ": " << r.message;
  ASSERT_EQ(r.logits.size(), want->size()) << o.backend;
  EXPECT_LT(RelL2(r.logits, *want), kTolerance)
      << o.backend << " graph " << o.cuda_graph;
  EXPECT_LT(RelL2(r.timed_logits, *want), kTolerance)
      << o.backend << " graph " << o.cuda_graph << ": the timed iterations";
  const int first = ref::VocabBegin(spec.config, spec.shard);
  const int rows = ref::OwnBatch(spec.shard, spec.batch);
  EXPECT_EQ(r.next_tokens, ArgMax(r.logits, rows, first)) << o.backend;
  EXPECT_EQ(r.next_tokens, ArgMax(*want, rows, first)) << o.backend;
  EXPECT_EQ(r.samples_us.size(), 2u);
  for (double us : r.samples_us) EXPECT_GT(us, 0);
}

TEST(StepGpuTest, TinyWholeStepMatchesTheReferenceOnEveryBackend) {
  SKIP_WITHOUT_GPU();
  const model::ModelConfig& tiny = *model::FindPreset("tiny");
  for (const std::string& name : RunnableBackends()) {
    const backends::BackendDescriptor& backend = *backends::FindBackend(name);
    // 40 past tokens > index_topk 16: the indexer drops some. Three
    // sequences, or one for a backend that runs one token.
    const int batch = backend.max_batch > 0 && backend.max_batch < 3 ? 1 : 3;
    const std::string why = backend.CanImplement(
        {tiny.hidden, tiny.moe_intermediate, batch}, backend.DefaultTile());
    if (!why.empty()) continue;  // e.g. fused_gemv_fp8's tiles exceed tiny
    for (bool graph : {false, true}) {
      if (graph && !backend.graph_capturable) continue;
      ExpectMatchesReference(Spec("tiny", 4, batch, 40), Options(name, graph));
    }
  }
}

TEST(StepGpuTest, TinyShardedRanksMatchTheReferenceRank) {
  SKIP_WITHOUT_GPU();
  for (ref::Shard shard :
       {ref::Shard{2, 1, 1}, ref::Shard{1, 2, 1}, ref::Shard{2, 2, 2}}) {
    SCOPED_TRACE(::testing::Message() << "tp " << shard.tp << " ep " << shard.ep
                                      << " rank " << shard.rank);
    ExpectMatchesReference(Spec("tiny", 4, 2, 24, shard),
                           Options("fused_gemv", true));
  }
}

// Data-parallel attention without peers: the rank decodes its own
// sequences with whole attention, dense MLP and lm_head, its MoE layers
// running over every rank's tokens (the others' synthetic); its own rows
// are its experts' partial sums, as the reference rank computes them.
TEST(StepGpuTest, TinyDataParallelRanksMatchTheReferenceRank) {
  SKIP_WITHOUT_GPU();
  for (ref::Shard shard : {ref::Shard{1, 2, 1, true}, ref::Shard{2, 2, 2, true},
                           ref::Shard{1, 1, 0, true}}) {
    SCOPED_TRACE(::testing::Message() << "tp " << shard.tp << " ep " << shard.ep
                                      << " rank " << shard.rank << " dp");
    for (bool graph : {false, true}) {
      ExpectMatchesReference(Spec("tiny", 4, 4, 24, shard),
                             Options("fused_gemv", graph));
    }
  }
}

// The problem a data-parallel rank runs: its own sequences' tokens from its
// first on, and the other ranks' MoE inputs for the rows that are not its.
TEST(StepProblemTest, DataParallelRanksGetTheirOwnSequences) {
  const ref::StepSpec spec = Spec("tiny", 4, 4, 24, ref::Shard{1, 2, 1, true});
  const StepProblem p = MakeStepProblem(spec);
  EXPECT_TRUE(p.dp_attention);
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.first_sequence, 2);
  EXPECT_EQ(MoeTokens(p), 4);
  EXPECT_EQ(p.tokens,
            (std::vector<int>{ref::TokenId(spec, 2), ref::TokenId(spec, 3)}));
  EXPECT_EQ(p.peer_moe_input,
            ref::MoeLayerInput(spec, spec.config.num_dense_layers));
  const StepProblem alone =
      MakeStepProblem(Spec("tiny", 4, 4, 24, ref::Shard{1, 1, 0, true}));
  EXPECT_EQ(alone.batch, 4);
  EXPECT_TRUE(alone.peer_moe_input.empty());
}

TEST(StepGpuTest, ShortContextsKeepEveryToken) {
  SKIP_WITHOUT_GPU();
  for (int context : {0, 1, 15}) {
    ExpectMatchesReference(Spec("tiny", 2, 2, context),
                           Options("fused_gemv", false));
  }
}

// What the timed iterations computed (the graph's replays, or eager
// launches) is checked too, not only the untimed eager pass: both match the
// reference and pick its tokens. (Not bit for bit with each other: the
// expert_mma backends add their experts' outputs with float atomics, so
// two of their steps agree only to rounding.)
TEST(StepGpuTest, GraphAndEagerStepsBothMatchTheReference) {
  SKIP_WITHOUT_GPU();
  for (bool graph : {false, true}) {
    ExpectMatchesReference(Spec("tiny", 4, 4, 33),
                           Options("fused_gemv", graph));
  }
  // Closer than the reference: the replay and the eager pass of one run
  // differ by the atomics' rounding at most (1e-7 a layer; 5e-5 seen where
  // it tips an indexer near-tie), a graph that missed a kernel by far more.
  const StepRunResult r = RunDecodeStep(MakeStepProblem(Spec("tiny", 4, 4, 33)),
                                        Options("fused_gemv", true));
  ASSERT_EQ(r.status, RunStatus::kOk) << r.message;
  EXPECT_LT(RelL2(r.timed_logits, r.logits), 1e-3);
  EXPECT_GT(r.kernels_per_step, 4 * 10);
}

// Runs `steps` steps in a row from `spec` (each appending its tokens, graph
// off and on alternately, each decoding the tokens the one before chose)
// and checks each against the reference's DecodeSteps.
void ExpectStepsInARowMatchTheReference(const ref::StepSpec& spec, int steps) {
  const auto want =
      ref::DecodeSteps(spec, steps, ref::Bf16InputReferenceMoe(spec));
  ASSERT_TRUE(want.ok()) << want.status();
  ref::Generated chosen;  // only its tokens: the GPU keeps its own caches
  chosen.prefilled = spec.context;
  for (int s = 0; s < steps; ++s) {
    SCOPED_TRACE(::testing::Message() << "step " << s);
    ref::StepSpec at = spec;
    at.context = spec.context + s;
    if (s > 0) at.generated = &chosen;
    StepProblem p = MakeStepProblem(at);
    p.prefilled = spec.context;
    p.cache_tokens = spec.context + steps;
    StepRunOptions o = Options("fused_gemv", s % 2 == 1);
    o.append_to_caches = true;
    const StepRunResult r = RunDecodeStep(p, o);
    ASSERT_EQ(r.status, RunStatus::kOk) << r.message;
    EXPECT_LT(RelL2(r.logits, (*want)[s]), kTolerance);
    EXPECT_LT(RelL2(r.timed_logits, (*want)[s]), kTolerance);
    EXPECT_EQ(r.next_tokens, ArgMax((*want)[s], spec.batch, 0));
    chosen.tokens = r.next_tokens;
  }
}

// Several steps in a row, each appending its tokens' entries to the caches
// and decoding the tokens the one before chose, against the reference's
// steps (graph off and on alternately).
TEST(StepGpuTest, SeveralStepsInARowMatchTheReference) {
  SKIP_WITHOUT_GPU();
  const ref::StepSpec spec = Spec("tiny", 4, 2, 30);  // 30 + 3 > topk 16
  ExpectStepsInARowMatchTheReference(spec, 3);
}

// Checked before the device is touched: runs without a GPU too.
TEST(StepGpuTest, AppendingNeedsRoomInTheCaches) {
  StepRunOptions o = Options("fused_gemv", false);
  o.append_to_caches = true;
  const StepRunResult r =
      RunDecodeStep(MakeStepProblem(Spec("tiny", 4, 1, 8)), o);
  EXPECT_EQ(r.status, RunStatus::kBadProblem);
  EXPECT_THAT(r.message, ::testing::HasSubstr("cache_tokens"));
}

// GLM-5's real dims, rank 0 and rank 3 of world 8, one dense layer: every
// kernel of attention, the indexer (3000 past tokens: it keeps 2048) and
// the dense MLP at its real size, against the CPU reference.
TEST(StepGpuTest, Glm5DenseLayerMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  for (ref::Shard shard : {ref::Shard{8, 1, 0}, ref::Shard{1, 8, 3}}) {
    const ref::StepSpec spec = Spec("glm5", 1, 2, 3000, shard);
    ExpectMatchesReference(spec, Options("fused_gemv", false));
  }
}

// Real dims with MoE layers: each MoE layer against the trusted path on its
// own input in the step, its routed experts counted for the floor.
TEST(StepGpuTest, Glm5MoeLayersMatchTheTrustedPath) {
  SKIP_WITHOUT_GPU();
  const ref::StepSpec spec = Spec("glm5", 5, 2, 512, ref::Shard{8, 1, 0});
  StepRunOptions o = Options("fused_gemv", true);
  o.compute_reference = true;
  o.profile_parts = true;
  const StepRunResult r = RunDecodeStep(MakeStepProblem(spec), o);
  ASSERT_EQ(r.status, RunStatus::kOk) << r.message;
  const size_t block = 2u * spec.config.hidden;
  ASSERT_EQ(r.moe_output.size(), 2 * block);  // layers 3 and 4
  ASSERT_EQ(r.moe_reference.size(), 2 * block);
  for (size_t l = 0; l < 2; ++l) {
    const std::vector<float> got(r.moe_output.begin() + l * block,
                                 r.moe_output.begin() + (l + 1) * block);
    const std::vector<float> want(r.moe_reference.begin() + l * block,
                                  r.moe_reference.begin() + (l + 1) * block);
    EXPECT_LT(RelL2(got, want), kTolerance) << "MoE layer " << l;
  }
  ASSERT_EQ(r.distinct_experts.size(), 2u);  // layers 3 and 4
  for (int distinct : r.distinct_experts) {
    EXPECT_GE(distinct, 8);  // 2 tokens x 8 experts, TP: every rank owns all
    EXPECT_LE(distinct, 16);
  }
  // The parts are observed on the schedule the step runs: the side
  // stream's absorption and query fragments among them.
  double parts = 0;
  std::vector<std::string> names;
  for (const auto& [name, us] : r.part_us) {
    parts += us;
    names.push_back(name);
  }
  EXPECT_GT(parts, 0);
  EXPECT_THAT(names, ::testing::IsSupersetOf({"indexer/topk", "mla/absorb",
                                              "mla/queries", "mla/attention"}));
  EXPECT_GT(r.weight_bytes, 0);
}

TEST(StepGpuTest, AShardThatDoesNotFitIsRefusedWithItsSize) {
  SKIP_WITHOUT_GPU();
  // Every layer, batch 64, context 32768 at world 1: terabytes.
  const StepRunResult r =
      RunDecodeStep(MakeStepProblem(Spec("glm5", 78, 64, 32768)),
                    Options("fused_gemv", true));
  EXPECT_EQ(r.status, RunStatus::kCannotImplement);
  EXPECT_NE(r.message.find("GiB"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("free"), std::string::npos) << r.message;
}

// ------------------------------------------------------------ formats --

// The formats a workload can give the step (spec fields quantization and
// kv_cache_dtype): each alone, and all at once.
struct Formats {
  const char* name;
  ref::Quantization quantization;
  ref::KvCacheDtype kv_cache;
};
std::vector<Formats> AllFormats() {
  using ref::Precision;
  const ref::Quantization defaults;
  ref::Quantization attention = defaults, dense = defaults, head = defaults;
  attention.attention = Precision::kNvfp4;
  dense.dense_mlp = Precision::kBf16;
  head.lm_head = Precision::kNvfp4;
  const ref::Quantization all{Precision::kNvfp4, Precision::kBf16,
                              Precision::kNvfp4};
  const auto fp8 = ref::KvCacheDtype::kFp8E4M3;
  const auto bf16 = ref::KvCacheDtype::kBf16;
  return {{"attention NVFP4", attention, bf16},
          {"dense MLP BF16", dense, bf16},
          {"lm_head NVFP4", head, bf16},
          {"FP8 KV cache", defaults, fp8},
          {"all of them", all, fp8}};
}

ref::StepSpec WithFormats(ref::StepSpec spec, const Formats& f) {
  spec.quantization = f.quantization;
  spec.kv_cache = f.kv_cache;
  return spec;
}

// The whole tiny step in every format against the reference in the same
// format (the same NVFP4 weights from the hash, the same FP8 cache bytes),
// graph off and on; and a sharded rank.
TEST(StepGpuFormatsTest, TinyStepInEveryFormatMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  for (const Formats& f : AllFormats()) {
    SCOPED_TRACE(f.name);
    for (bool graph : {false, true}) {
      ExpectMatchesReference(WithFormats(Spec("tiny", 4, 3, 40), f),
                             Options("fused_gemv", graph));
    }
    ExpectMatchesReference(
        WithFormats(Spec("tiny", 4, 2, 24, ref::Shard{2, 1, 1}), f),
        Options("fused_gemv", true));
  }
}

// Eleven sequences reach the paths that start at 8: the query absorption's
// blocks of 8 sequences (the second part full), the attention's queries
// made before its blocks of two tiles; in every format (BF16 and NVFP4
// W_UK), graph on. Two layers (the dense one and one MoE layer): over
// three MoE layers, 11 sequences make ~100 routing choices of 8 of 32
// experts, and the reference finds some within 3e-3 of a tie, where the
// GPU's BF16-carried activations may pick the other expert (with the dense
// MLP in BF16 one sequence can, its logits then 0.195 off).
TEST(StepGpuFormatsTest, ElevenSequencesInEveryFormatMatchTheReference) {
  SKIP_WITHOUT_GPU();
  for (const Formats& f : AllFormats()) {
    SCOPED_TRACE(f.name);
    ExpectMatchesReference(WithFormats(Spec("tiny", 2, 11, 40), f),
                           Options("fused_gemv", true));
  }
}

// As ExpectMatchesReference, the reference following the GPU's expert
// choices of every MoE layer and its kept sets of every layer where they are
// near its own top k (StepRunResult::chosen_experts, kept_tokens; reference
// DecodeSequencesFollowing). Unsharded specs.
void ExpectMatchesFollowingGpuRouting(const ref::StepSpec& spec,
                                      const StepRunOptions& o) {
  const StepRunResult r = RunDecodeStep(MakeStepProblem(spec), o);
  ASSERT_EQ(r.status, RunStatus::kOk) << o.backend << ": " << r.message;
  ref::ProposedChoices proposed;
  absl::StatusOr<ref::ProposedRoutes> routes =
      ref::MoeLayerRoutes(spec, r.chosen_experts);
  ASSERT_TRUE(routes.ok()) << routes.status();
  absl::StatusOr<ref::ProposedKept> kept =
      ref::LayerKeptSets(spec, r.kept_tokens, r.kept_counts);
  ASSERT_TRUE(kept.ok()) << kept.status();
  proposed.routes = *std::move(routes);
  proposed.kept = *std::move(kept);
  const auto want = ref::DecodeSequencesFollowing(spec, 0, std::move(proposed));
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(r.logits.size(), want->size());
  EXPECT_LT(RelL2(r.logits, *want), kTolerance) << o.backend;
  EXPECT_LT(RelL2(r.timed_logits, *want), kTolerance) << o.backend;
}

// Eleven sequences over all four layers (three MoE layers: ~260 routing
// choices, some near a tie) in every format, graph on, the reference
// following the GPU's routing and kept sets near a tie; at context 256 the
// indexer keeps 16 of 257 tokens, and tiny's scores tie at zero where ReLU
// removes every head's term (through the worker, 6e-2 against the plain
// reference with NVFP4 attention).
TEST(StepGpuFormatsTest, ElevenSequencesOverFourLayersFollowingGpuRouting) {
  SKIP_WITHOUT_GPU();
  for (const Formats& f : AllFormats()) {
    for (const int context : {40, 256}) {
      SCOPED_TRACE(std::string(f.name) + " context " + std::to_string(context));
      ExpectMatchesFollowingGpuRouting(
          WithFormats(Spec("tiny", 4, 11, context), f),
          Options("fused_gemv", true));
    }
  }
}

// Enough sequences that the attention's query fragments are made before
// its blocks (tiny's 4 heads: 16 sequences make 8 of 8 heads), which the
// step makes on the side stream beside the indexer, after the absorbed
// queries they read; graph off and on, the reference following the GPU's
// routing and kept sets near a tie.
TEST(StepGpuTest, QueriesMadeBesideTheIndexerMatchTheReference) {
  SKIP_WITHOUT_GPU();
  ASSERT_GE(16 * 4, testing::QueriesMadeBeforeFromBatch() * 8);
  for (bool graph : {false, true}) {
    SCOPED_TRACE(graph ? "graph" : "eager");
    ExpectMatchesFollowingGpuRouting(Spec("tiny", 4, 16, 40),
                                     Options("fused_gemv", graph));
  }
}

// Contexts the indexer keeps whole, the new token alone among them.
TEST(StepGpuFormatsTest, Fp8CacheAtShortContexts) {
  SKIP_WITHOUT_GPU();
  const Formats all = AllFormats().back();
  for (int context : {0, 1, 15}) {
    ExpectMatchesReference(WithFormats(Spec("tiny", 2, 2, context), all),
                           Options("fused_gemv", false));
  }
}

// Several steps in a row with the FP8 cache: each step's tokens are
// quantized when appended (the reference's DecodeSteps stores them the
// same way), and the next step attends to them.
TEST(StepGpuFormatsTest, SeveralStepsWithAnFp8CacheMatchTheReference) {
  SKIP_WITHOUT_GPU();
  const ref::StepSpec spec =
      WithFormats(Spec("tiny", 4, 2, 30), AllFormats().back());
  ExpectStepsInARowMatchTheReference(spec, 3);
}

// GLM-5's real dims, one dense layer, rank 3 of world 8 (3000 past tokens:
// the indexer keeps 2048): the NVFP4 attention projections, the BF16 dense
// MLP, the NVFP4 lm_head and the FP8 cache at their real sizes, against
// the CPU reference. One case a format (each CPU reference takes a while).
class StepGpuGlm5FormatTest : public ::testing::TestWithParam<int> {};

TEST_P(StepGpuGlm5FormatTest, DenseLayerMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  const Formats f = AllFormats()[GetParam()];
  SCOPED_TRACE(f.name);
  ExpectMatchesReference(
      WithFormats(Spec("glm5", 1, 2, 3000, ref::Shard{8, 1, 3}), f),
      Options("fused_gemv", false));
}

INSTANTIATE_TEST_SUITE_P(EveryFormat, StepGpuGlm5FormatTest,
                         ::testing::Range(0, 5));

// Each format's resident bytes at GLM-5's dims (no CPU reference): the FP8
// cache is 656 bytes a token a layer against 1152 (the indexer keys, 128,
// unchanged); NVFP4 shrinks a BF16 group to 9/32, BF16 grows the dense MLP
// by 32/9. Graph on: the formats' kernels capture.
TEST(StepGpuFormatsTest, Glm5ResidentBytesFollowTheFormats) {
  SKIP_WITHOUT_GPU();
  const ref::StepSpec base = Spec("glm5", 1, 2, 3000, ref::Shard{8, 1, 3});
  const StepRunResult bf16 =
      RunDecodeStep(MakeStepProblem(base), Options("fused_gemv", true));
  ASSERT_EQ(bf16.status, RunStatus::kOk) << bf16.message;
  for (const Formats& f : AllFormats()) {
    SCOPED_TRACE(f.name);
    const StepRunResult r = RunDecodeStep(MakeStepProblem(WithFormats(base, f)),
                                          Options("fused_gemv", true));
    ASSERT_EQ(r.status, RunStatus::kOk) << r.message;
    EXPECT_GT(r.kernels_per_step, 10);
    if (f.kv_cache == ref::KvCacheDtype::kFp8E4M3) {
      EXPECT_LT(r.cache_bytes, bf16.cache_bytes * 7 / 10);
    } else {
      EXPECT_EQ(r.cache_bytes, bf16.cache_bytes);
    }
    const bool attention4 = f.quantization.attention == ref::Precision::kNvfp4;
    const bool head4 = f.quantization.lm_head == ref::Precision::kNvfp4;
    const bool dense16 = f.quantization.dense_mlp == ref::Precision::kBf16;
    if (dense16 && !attention4 && !head4) {
      EXPECT_GT(r.weight_bytes, bf16.weight_bytes);
    } else if (!dense16 && (attention4 || head4)) {
      EXPECT_LT(r.weight_bytes, bf16.weight_bytes);
    }
  }
}

// Checked before the device is touched: runs anywhere.
TEST(StepGpuFormatsTest, FormatsTheKernelsCannotReadAreRefused) {
  StepProblem p = MakeStepProblem(Spec("tiny", 2, 1, 8));
  p.formats.kv_fp8 = true;
  p.dims.kv_lora = 40;  // 16-value FP8 loads
  StepRunResult r = RunDecodeStep(p, Options("fused_gemv", false));
  EXPECT_EQ(r.status, RunStatus::kCannotImplement);
  EXPECT_THAT(r.message, ::testing::HasSubstr("problem.formats.kv_fp8"));
  p = MakeStepProblem(Spec("tiny", 2, 1, 8));
  p.formats.attention_nvfp4 = true;
  p.dims.q_lora = 48;  // two 16-value blocks a lane
  r = RunDecodeStep(p, Options("fused_gemv", false));
  EXPECT_EQ(r.status, RunStatus::kCannotImplement);
  EXPECT_THAT(r.message,
              ::testing::HasSubstr("problem.formats.attention_nvfp4"));
}

// Checked before the device is touched: runs anywhere.
TEST(StepGpuTest, BadProblemsAreRefusedNamingTheField) {
  StepProblem p = MakeStepProblem(Spec("tiny", 2, 1, 8));
  p.tokens.clear();
  const StepRunResult r = RunDecodeStep(p, Options("fused_gemv", false));
  EXPECT_EQ(r.status, RunStatus::kBadProblem);
  EXPECT_NE(r.message.find("problem.tokens"), std::string::npos) << r.message;
  StepProblem past = MakeStepProblem(Spec("tiny", 2, 1, 8));
  past.prefilled = 9;  // more synthetic tokens than the context
  const StepRunResult refused =
      RunDecodeStep(past, Options("fused_gemv", false));
  EXPECT_EQ(refused.status, RunStatus::kBadProblem);
  EXPECT_THAT(refused.message, ::testing::HasSubstr("problem.prefilled"));
}

}  // namespace
}  // namespace moetune::gpu
