// kernels/cuda/moe/moe_gpu.h: every backend, tile and graph mode against the
// trusted GPU path on small dims; the trusted path against a CPU evaluation
// in double; sharding, statuses, bytes. GPU cases skip without a device; the
// validation and no-device cases run anywhere.
#include "kernels/cuda/moe/moe_gpu.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backends/registry.h"
#include "kernels/cuda/bench/cpu_check.h"
#include "kernels/cuda/comm/comm_gpu.h"
#include "kernels/cuda/moe/chain_budget.h"
#include "kernels/model/weight_gen.h"

namespace moetune::gpu {
namespace {

using backends::BackendDescriptor;
using backends::Tile;
using ::testing::HasSubstr;

// Every GPU backend of the registry that has kernels.
std::vector<const BackendDescriptor*> GpuBackends() {
  std::vector<const BackendDescriptor*> out;
  for (const BackendDescriptor* b : backends::AllBackends()) {
    if (b->is_gpu() && b->gpu.not_implemented.empty()) out.push_back(b);
  }
  return out;
}

// Whether the backend's descriptor says `tile` runs problem `p`.
bool Fits(const BackendDescriptor& b, const MoeProblem& p, const Tile& tile) {
  return b
      .CanImplement({p.dims.hidden, p.dims.moe_inter / p.shard.tp, p.batch},
                    tile)
      .empty();
}

// Its tiles, or Tile{} for a backend without tiles.
std::vector<Tile> TilesOf(const BackendDescriptor& b) {
  std::vector<Tile> tiles(b.tiles.begin(), b.tiles.end());
  if (tiles.empty()) tiles.push_back(Tile{});
  return tiles;
}

#define SKIP_WITHOUT_GPU() \
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

constexpr double kTolerance = 2e-2;

constexpr MoeDims kSmallDims = {256, 128, 16, 4, 1, 2.5f};

MoeProblem Small(int batch, uint64_t seed, MoeShard shard = {},
                 MoeDims dims = kSmallDims) {
  MoeProblem p;
  p.dims = dims;
  p.seed = seed;
  p.layer = 5;
  p.batch = batch;
  p.shard = shard;
  std::mt19937 rng(static_cast<unsigned>(seed * 31 + batch));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  p.input.resize(static_cast<size_t>(batch) * p.dims.hidden);
  for (float& v : p.input) v = u(rng);
  for (int e = 0; e < p.dims.num_experts; ++e)
    p.router_bias.push_back(0.01f * u(rng));
  return p;
}

// `p` with another hidden size (its input refilled with 0.5).
MoeProblem WithHidden(MoeProblem p, int hidden) {
  p.dims.hidden = hidden;
  p.input.assign(static_cast<size_t>(p.batch) * hidden, 0.5f);
  return p;
}

MoeRunOptions Options(const std::string& backend, const Tile& tile = {},
                      bool graph = false) {
  MoeRunOptions o;
  o.backend = backend;
  o.tile = tile;
  o.cuda_graph = graph;
  o.warmup = 1;
  o.iterations = 2;
  return o;
}

// Relative L2 error, and the largest |out - ref| / max(|ref|, rms(ref)).
std::pair<double, double> Errors(const std::vector<float>& out,
                                 const std::vector<double>& ref) {
  double ss = 0, diff = 0, worst = 0;
  for (double r : ref) ss += r * r;
  const double rms = std::sqrt(ss / ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::fabs(out[i] - ref[i]);
    diff += d * d;
    worst =
        std::max(worst, std::isfinite(d) ? d / std::max(std::fabs(ref[i]), rms)
                                         : INFINITY);
  }
  return {std::sqrt(diff / ss), worst};
}

std::vector<double> ToDouble(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

// Every output element of `p` on the CPU, in double.
std::vector<double> CpuOutput(const MoeProblem& p) {
  std::vector<int> tokens, rows;
  for (int t = 0; t < p.batch; ++t) tokens.push_back(t);
  for (int row = 0; row < p.dims.hidden; ++row) rows.push_back(row);
  return cpu::OutputRows(p, tokens, rows, 4);
}

TEST(MoeGpuValidationTest, BadProblemsAreBadProblemsWithTheFieldNamed) {
  MoeProblem p = Small(2, 1);
  p.batch = 0;
  MoeRunResult r = RunMoeLayer(p, Options("fused_gemv"));
  EXPECT_EQ(r.status, RunStatus::kBadProblem);
  EXPECT_THAT(r.message, HasSubstr("problem.batch"));
  p = Small(2, 1);
  p.input.pop_back();
  r = RunMoeLayer(p, Options("fused_gemv"));
  EXPECT_EQ(r.status, RunStatus::kBadProblem);
  EXPECT_THAT(r.message,
              HasSubstr("problem.input: size must be batch * hidden = 512"));
  p = Small(2, 1);
  p.shard = {2, 2, 4};
  r = RunMoeLayer(p, Options("fused_gemv"));
  EXPECT_EQ(r.status, RunStatus::kBadProblem);
  EXPECT_THAT(r.message, HasSubstr("problem.shard.rank"));
  p = Small(2, 1);
  p.input[3] = NAN;
  EXPECT_EQ(RunMoeLayer(p, Options("fused_gemv")).status,
            RunStatus::kBadProblem);
  r = RunMoeLayer(Small(2, 1), Options("cpu_reference"));
  EXPECT_EQ(r.status, RunStatus::kBadProblem);
  EXPECT_THAT(r.message, HasSubstr("options.backend"));
  EXPECT_THAT(r.message, HasSubstr("fused_gemv"));
  for (const int chain : {0, 17}) {
    MoeRunOptions o = Options("fused_gemv");
    o.chain_layers = chain;
    r = RunMoeLayer(Small(2, 1), o);
    EXPECT_EQ(r.status, RunStatus::kBadProblem);
    EXPECT_THAT(r.message,
                HasSubstr("options.chain_layers: must be in [1, 16]"));
  }
}

// Each chained layer keeps ~5.4 GB of weights at glm5 dims: a chain that
// does not fit is refused with the sizes before anything is allocated.
TEST(ChainBudgetTest, RefusesWithTheSizesWhatDoesNotFit) {
  EXPECT_EQ(ChainDoesNotFit(8, 7, 5.4e9, 100e9), "");
  EXPECT_EQ(ChainDoesNotFit(8, 0, 5.4e9, 0), "");
  const std::string error = ChainDoesNotFit(16, 15, 5.4e9, 80e9);
  EXPECT_THAT(error, HasSubstr("options.chain_layers: 16 layers"));
  EXPECT_THAT(error, HasSubstr("15 more need 81.0 GB and 80.0 GB are free"));
  EXPECT_NE(ChainDoesNotFit(2, 1, 5.4e9, 6.0e9), "");  // into the reserve
}

// One layer's block of a chain's output or reference.
std::vector<float> LayerBlock(const std::vector<float>& v, int i, size_t n) {
  return {v.begin() + i * n, v.begin() + (i + 1) * n};
}

// A chain of layers back to back: every layer's output, each checked against
// the trusted path of that layer (its weights, the first layer's input and
// bias), the first as alone; each layer's own routing in the bytes.
TEST(MoeGpuTest, ChainOfLayersChecksEveryLayerAndReportsPerLayerFigures) {
  SKIP_WITHOUT_GPU();
  const MoeProblem p = Small(3, 19);
  const size_t n = p.input.size();
  MoeProblem third = p;
  third.layer = p.layer + 2;
  MoeRunOptions one = Options("fused_gemv");
  one.compute_reference = true;
  const MoeRunResult third_alone = RunMoeLayer(third, one);
  ASSERT_EQ(third_alone.status, RunStatus::kOk) << third_alone.message;
  for (const bool graph : {false, true}) {
    SCOPED_TRACE(graph ? "graph" : "stream");
    one.cuda_graph = graph;
    const MoeRunResult alone = RunMoeLayer(p, one);
    ASSERT_EQ(alone.status, RunStatus::kOk) << alone.message;
    MoeRunOptions chained = one;
    chained.chain_layers = 3;
    const MoeRunResult r = RunMoeLayer(p, chained);
    ASSERT_EQ(r.status, RunStatus::kOk) << r.message;
    ASSERT_EQ(r.output.size(), 3 * n);
    ASSERT_EQ(r.reference_output.size(), 3 * n);
    EXPECT_EQ(LayerBlock(r.reference_output, 0, n), alone.reference_output);
    EXPECT_EQ(LayerBlock(r.reference_output, 2, n),
              third_alone.reference_output);
    EXPECT_NE(LayerBlock(r.reference_output, 1, n), alone.reference_output);
    for (int i = 0; i < 3; ++i) {
      EXPECT_LT(Errors(LayerBlock(r.output, i, n),
                       ToDouble(LayerBlock(r.reference_output, i, n)))
                    .first,
                kTolerance)
          << "layer " << i;
    }
    EXPECT_EQ(r.samples_us.size(), 2u);
    EXPECT_EQ(r.distinct_experts, alone.distinct_experts);
    // The mean of three layers' bytes: between the router-only and the
    // every-expert bound of one layer.
    EXPECT_GT(r.bytes, 0.5 * alone.bytes);
    EXPECT_LT(r.bytes, 2.0 * alone.bytes);
    for (const double us : r.samples_us) EXPECT_GT(us, 0.0);
  }
}

TEST(MoeGpuValidationTest, CompiledForHopper) {
  const std::vector<int> archs = CompiledArchs();
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
  // NCCL is linked (the gang's communication): its version as "X.Y.Z",
  // which goes into every result's fingerprint.
  const std::string nccl = NcclVersion();
  EXPECT_EQ(std::count(nccl.begin(), nccl.end(), '.'), 2) << nccl;
  EXPECT_EQ(nccl.rfind("2.", 0), 0u) << nccl;
}

TEST(MoeGpuNoDeviceTest, EverythingSaysThereIsNoDevice) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  const DeviceInfo d = QueryDevice(0);
  EXPECT_FALSE(d.present);
  EXPECT_THAT(d.error, HasSubstr("no CUDA device"));
  const BackendAvailability a = ProbeMoeBackend("fused_gemv", 0);
  EXPECT_FALSE(a.available);
  EXPECT_THAT(a.reason, HasSubstr("no CUDA device"));
  const MoeRunResult r = RunMoeLayer(Small(2, 1), Options("grouped_mma"));
  EXPECT_EQ(r.status, RunStatus::kUnavailable);
  std::string error;
  EXPECT_EQ(MeasureReadBandwidthGBps(0, &error), 0.0);
  EXPECT_FALSE(error.empty());
}

TEST(MoeGpuTest, DeviceQueryAndProbes) {
  SKIP_WITHOUT_GPU();
  const DeviceInfo d = QueryDevice(0);
  ASSERT_TRUE(d.present) << d.error;
  EXPECT_GT(d.sm_count, 0);
  EXPECT_GT(d.memory_bytes, int64_t{1} << 30);
  EXPECT_TRUE(ProbeMoeBackend("fused_gemv", 0).available);
  const BackendAvailability fp4 = ProbeMoeBackend("native_fp4", 0);
  EXPECT_FALSE(fp4.available);
  EXPECT_THAT(fp4.reason, HasSubstr("sm_100"));
  std::string error;
  EXPECT_GT(MeasureReadBandwidthGBps(0, &error), 100.0) << error;
}

// The oracle itself: every output element against the CPU in double.
TEST(MoeGpuTest, TrustedPathMatchesTheCpuEvaluation) {
  SKIP_WITHOUT_GPU();
  for (int batch : {1, 5}) {
    const MoeProblem p = Small(batch, 7);
    MoeRunOptions o = Options("grouped_mma");
    o.compute_reference = true;
    const MoeRunResult r = RunMoeLayer(p, o);
    ASSERT_EQ(r.status, RunStatus::kOk) << r.message;
    const auto [rel_l2, worst] = Errors(r.reference_output, CpuOutput(p));
    EXPECT_LT(rel_l2, 1e-5) << "batch " << batch;
    EXPECT_LT(worst, 1e-4) << "batch " << batch;
  }
}

TEST(MoeGpuTest, EveryBackendTileAndGraphModeMatchesTheTrustedPath) {
  SKIP_WITHOUT_GPU();
  for (int batch : {1, 5, 17, 40}) {
    const MoeProblem p = Small(batch, 11);
    MoeRunOptions ro = Options("grouped_mma");
    ro.compute_reference = true;
    const MoeRunResult ref = RunMoeLayer(p, ro);
    ASSERT_EQ(ref.status, RunStatus::kOk) << ref.message;
    for (const BackendDescriptor* backend : GpuBackends()) {
      const BackendDescriptor& info = *backend;
      const std::string name(info.name);
      for (const Tile& t : TilesOf(info)) {
        for (const bool graph : {false, true}) {
          SCOPED_TRACE(name + " " + backends::TileText(t) +
                       (graph ? " graph" : "") + " batch " +
                       std::to_string(batch));
          const MoeRunResult r = RunMoeLayer(p, Options(name, t, graph));
          // Out of a backend's reach: no graph capture (dequant_cublas), a
          // batch limit or a K it does not walk in whole steps
          // (fused_gemv_fp8 on these dims: only 128x128).
          const bool out_of_reach =
              (!info.graph_capturable && graph) || !Fits(info, p, t);
          if (out_of_reach) {
            EXPECT_EQ(r.status, RunStatus::kCannotImplement) << r.message;
            continue;
          }
          ASSERT_EQ(r.status, RunStatus::kOk) << r.message;
          ASSERT_EQ(r.output.size(), p.input.size());
          EXPECT_EQ(r.samples_us.size(), 2u);
          const auto [rel_l2, worst] =
              Errors(r.output, ToDouble(ref.reference_output));
          EXPECT_LT(rel_l2, kTolerance);
          EXPECT_LT(worst, kTolerance);
        }
      }
    }
  }
}

// The small dims reach fused_gemv_fp8 only as its 128x128 tile; these
// (K = 1024 and 512) fit every tile of the catalog, so the shipped 128x512
// is checked against the CPU here too, not only by the bench's full-dims
// check on the H200.
TEST(MoeGpuTest, EveryFp8TileMatchesTheCpuWhereItFits) {
  SKIP_WITHOUT_GPU();
  MoeDims dims = kSmallDims;
  dims.hidden = 1024;
  dims.moe_inter = 512;
  const MoeProblem p = Small(1, 23, {}, dims);
  const std::vector<double> cpu = CpuOutput(p);
  const BackendDescriptor& info = *backends::FindBackend("fused_gemv_fp8");
  for (const Tile& t : info.tiles) {
    ASSERT_TRUE(Fits(info, p, t)) << backends::TileText(t);
    for (const bool graph : {false, true}) {
      SCOPED_TRACE(backends::TileText(t) + (graph ? " graph" : ""));
      const MoeRunResult r =
          RunMoeLayer(p, Options("fused_gemv_fp8", t, graph));
      ASSERT_EQ(r.status, RunStatus::kOk) << r.message;
      const auto [rel_l2, worst] = Errors(r.output, cpu);
      EXPECT_LT(rel_l2, kTolerance);
      EXPECT_LT(worst, kTolerance);
    }
  }
}

TEST(MoeGpuTest, RankPartialSumsAddUpToTheWholeLayer) {
  SKIP_WITHOUT_GPU();
  const MoeProblem whole = Small(3, 13);
  const MoeRunResult w = RunMoeLayer(whole, Options("fused_gemv"));
  ASSERT_EQ(w.status, RunStatus::kOk) << w.message;
  std::vector<double> sum(whole.input.size(), 0.0);
  for (int rank = 0; rank < 4; ++rank) {
    MoeProblem p = whole;
    p.shard = {2, 2, rank};
    MoeRunOptions o = Options(rank % 2 == 0 ? "grouped_mma" : "fused_gemv");
    o.compute_reference = true;
    const MoeRunResult r = RunMoeLayer(p, o);
    ASSERT_EQ(r.status, RunStatus::kOk) << r.message;
    EXPECT_LT(Errors(r.output, ToDouble(r.reference_output)).first, kTolerance)
        << rank;
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += r.output[i];
  }
  std::vector<float> sumf(sum.begin(), sum.end());
  EXPECT_LT(Errors(sumf, ToDouble(w.output)).first, kTolerance);
}

// fused_gemv_fp8 on each expert-parallel rank (the shared expert on rank 0
// only; a rank may own none of the picks; graph mode on odd ranks): it
// reports the experts fused_gemv reports, matches the trusted path, and the
// ranks add up to the whole layer.
TEST(MoeGpuTest, Fp8OnEveryExpertRankAddsUpToTheLayer) {
  SKIP_WITHOUT_GPU();
  for (const uint64_t seed : {3u, 17u, 29u}) {
    const MoeProblem whole = Small(1, seed);
    const MoeRunResult w = RunMoeLayer(whole, Options("fused_gemv"));
    ASSERT_EQ(w.status, RunStatus::kOk) << w.message;
    std::vector<double> sum(whole.input.size(), 0.0);
    int routed = 0;
    for (int rank = 0; rank < 4; ++rank) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " rank " +
                   std::to_string(rank));
      const MoeProblem p = Small(1, seed, {1, 4, rank});
      MoeRunOptions o = Options("fused_gemv_fp8", {128, 128}, rank % 2 == 1);
      o.compute_reference = true;
      const MoeRunResult r = RunMoeLayer(p, o);
      ASSERT_EQ(r.status, RunStatus::kOk) << r.message;
      const MoeRunResult g = RunMoeLayer(p, Options("fused_gemv"));
      ASSERT_EQ(g.status, RunStatus::kOk) << g.message;
      EXPECT_EQ(r.distinct_experts, g.distinct_experts);
      routed += r.distinct_experts;
      if (rank == 0 || r.distinct_experts > 0) {
        EXPECT_LT(Errors(r.output, ToDouble(r.reference_output)).first,
                  kTolerance);
      }
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += r.output[i];
    }
    EXPECT_EQ(routed, whole.dims.top_k);
    std::vector<float> sumf(sum.begin(), sum.end());
    EXPECT_LT(Errors(sumf, ToDouble(w.output)).first, kTolerance);
  }
}

// A tie at the top-k boundary. With a one-hot input (column j) two experts'
// logits are equal -- their router weights in column j are the same BF16
// value -- and the biases put top_k - 1 other experts above that pair and
// the rest below it, so the last pick is decided by the tie rule alone: the
// lower expert index, as the CPU evaluation's stable sort. *picked and
// *passed over get the pair.
MoeProblem TiedAtTheBoundary(int batch, int* picked, int* passed_over) {
  MoeProblem p = Small(batch, 23);
  const int hidden = p.dims.hidden, experts = p.dims.num_experts;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hidden));
  auto weight = [&](int e, int c) {
    return weights::Bf16Weight(p.seed, static_cast<uint32_t>(p.layer),
                               weights::kRouter,
                               static_cast<uint64_t>(e) * hidden + c, scale);
  };
  int column = -1;
  *picked = *passed_over = -1;
  for (int c = 0; c < hidden && column < 0; ++c) {
    for (int a = 0; a < experts && column < 0; ++a) {
      for (int b = a + 1; b < experts && column < 0; ++b) {
        if (weight(a, c) != 0.0f && weight(a, c) == weight(b, c)) {
          column = c;
          *picked = a;
          *passed_over = b;
        }
      }
    }
  }
  if (column < 0) {
    ADD_FAILURE() << "no two experts share a router weight";
    return p;
  }
  p.input.assign(static_cast<size_t>(batch) * hidden, 0.0f);
  for (int t = 0; t < batch; ++t) p.input[t * hidden + column] = 1.0f;
  int above = 0;
  for (int e = 0; e < experts; ++e) {
    const bool pair = e == *picked || e == *passed_over;
    p.router_bias[e] = pair ? 0.0f : above++ < p.dims.top_k - 1 ? 1.0f : -1.0f;
  }
  return p;
}

// The tie problem, on the CPU: the pair's lower expert is picked, the other
// is not, and the wrong pick would move the output by more than five times
// the tolerance (so the GPU test below can tell).
TEST(MoeGpuValidationTest, TieAtTheBoundaryDecidesTheLastPick) {
  for (const int batch : {1, 2, 8, 17}) {
    int picked = 0, passed_over = 0;
    const MoeProblem p = TiedAtTheBoundary(batch, &picked, &passed_over);
    for (int t = 0; t < batch; ++t) {
      const cpu::TokenRoute route = cpu::Route(p, cpu::RoundedInput(p), t);
      EXPECT_THAT(route.experts, ::testing::Contains(picked));
      EXPECT_THAT(route.experts,
                  ::testing::Not(::testing::Contains(passed_over)));
    }
    MoeProblem swapped = p;  // the other expert of the pair wins
    swapped.router_bias[passed_over] = 1e-3f;
    const std::vector<double> right = CpuOutput(p), wrong = CpuOutput(swapped);
    EXPECT_GT(
        Errors(std::vector<float>(wrong.begin(), wrong.end()), right).first,
        5 * kTolerance);
  }
}

// Every router path (batch 1's block-wide ranking, batch 2's warp rounds,
// batch 8's clusters, batch 17's top-k over a cluster) and every backend
// (its first tile that fits) break the tie as the CPU.
TEST(MoeGpuTest, TiedRouterScoresPickTheLowerExpertOnEveryBackend) {
  SKIP_WITHOUT_GPU();
  for (const int batch : {1, 2, 8, 17}) {
    int picked = 0, passed_over = 0;
    const MoeProblem p = TiedAtTheBoundary(batch, &picked, &passed_over);
    const std::vector<double> cpu = CpuOutput(p);
    for (const BackendDescriptor* backend : GpuBackends()) {
      const std::string name(backend->name);
      std::vector<Tile> fitting;
      for (const Tile& t : TilesOf(*backend)) {
        if (Fits(*backend, p, t)) fitting.push_back(t);
      }
      if (fitting.empty()) continue;  // fused_gemv_fp8 at batch 2
      const Tile tile = fitting.front();
      SCOPED_TRACE(name + " batch " + std::to_string(batch));
      const MoeRunResult r = RunMoeLayer(p, Options(name, tile));
      ASSERT_EQ(r.status, RunStatus::kOk) << r.message;
      EXPECT_LT(Errors(r.output, cpu).first, kTolerance);
    }
  }
}

// The router's paths by token count -- one token; 2-7 a block an expert;
// 8-63 on tensor cores in clusters of four blocks over K (1-4 m-tiles of 16
// tokens); 64 up in three kernels -- with K split unevenly over a cluster's
// ranks (832: 13 chunks of 64), at its widest (8192: four chunks a warp) and at
// GLM-5's router (256 experts, top 8, 6144).
TEST(MoeGpuTest, EveryRouterPathMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  struct Case {
    MoeDims dims;
    std::vector<int> batches;
  };
  const std::vector<Case> cases = {
      {kSmallDims, {1, 2, 7, 8, 16, 17, 33, 49, 63, 64}},
      {{832, 128, 16, 4, 1, 2.5f}, {5, 8, 40, 63}},
      {{8192, 128, 16, 4, 1, 2.5f}, {5, 8, 63}},
      {{6144, 128, 256, 8, 1, 2.5f}, {7, 32, 63}},
  };
  for (const Case& c : cases) {
    for (const int batch : c.batches) {
      const MoeProblem p = Small(batch, 41, {}, c.dims);
      SCOPED_TRACE("hidden " + std::to_string(c.dims.hidden) + " experts " +
                   std::to_string(c.dims.num_experts) + " batch " +
                   std::to_string(batch));
      const MoeRunResult r = RunMoeLayer(p, Options("grouped_mma"));
      ASSERT_EQ(r.status, RunStatus::kOk) << r.message;
      EXPECT_LT(Errors(r.output, CpuOutput(p)).first, kTolerance);
    }
  }
}

TEST(MoeGpuTest, UnsupportedRequestsSayWhy) {
  SKIP_WITHOUT_GPU();
  const MoeProblem p = Small(2, 3);
  MoeRunResult r = RunMoeLayer(p, Options("fused_gemv", {8, 8}));
  EXPECT_EQ(r.status, RunStatus::kCannotImplement);
  EXPECT_THAT(r.message, HasSubstr("tiles: 16x256"));
  r = RunMoeLayer(p, Options("dequant_cublas", {0, 0}, true));
  EXPECT_EQ(r.status, RunStatus::kCannotImplement);
  EXPECT_THAT(r.message, HasSubstr("CUDA graph"));
  r = RunMoeLayer(p, Options("dequant_cublas", {64, 64}));
  EXPECT_EQ(r.status, RunStatus::kCannotImplement);
  r = RunMoeLayer(Small(4097, 3), Options("fused_gemv"));
  EXPECT_EQ(r.status, RunStatus::kCannotImplement);
  EXPECT_THAT(r.message, HasSubstr("at most 4096 tokens"));
  r = RunMoeLayer(p, Options("fused_gemv_fp8", {128, 128}));
  EXPECT_EQ(r.status, RunStatus::kCannotImplement);
  EXPECT_THAT(r.message, HasSubstr("one token"));
  r = RunMoeLayer(Small(1, 3), Options("fused_gemv_fp8", {128, 256}));
  EXPECT_EQ(r.status, RunStatus::kCannotImplement);
  EXPECT_THAT(r.message, HasSubstr("block_k must divide"));
  r = RunMoeLayer(p, Options("native_fp4"));
  EXPECT_EQ(r.status, RunStatus::kUnavailable);
  EXPECT_THAT(r.message, HasSubstr("sm_100"));
  r = RunMoeLayer(WithHidden(p, 96), Options("grouped_mma"));
  EXPECT_EQ(r.status, RunStatus::kCannotImplement);
  EXPECT_THAT(r.message, HasSubstr("multiples of 64"));
  // Wider than the router's registers hold: refused, not truncated.
  r = RunMoeLayer(WithHidden(p, 8256), Options("fused_gemv"));
  EXPECT_EQ(r.status, RunStatus::kCannotImplement);
  EXPECT_THAT(r.message, HasSubstr("hidden 8256"));
}

TEST(MoeGpuTest, BytesCountEachDistinctExpertOnce) {
  SKIP_WITHOUT_GPU();
  const MoeProblem p = Small(6, 17);
  const MoeRunResult r = RunMoeLayer(p, Options("fused_gemv"));
  ASSERT_EQ(r.status, RunStatus::kOk) << r.message;
  const std::vector<float> x = cpu::RoundedInput(p);
  std::set<int> experts;
  for (int t = 0; t < p.batch; ++t) {
    for (int e : cpu::Route(p, x, t).experts) experts.insert(e);
  }
  EXPECT_EQ(r.distinct_experts, static_cast<int>(experts.size()));
  // Router 16 x 256 BF16; per expert 3 x 128 x 256 weights at 4.5 bits;
  // input and output 6 x 256 BF16 each.
  const double want = 16 * 256 * 2 +
                      (experts.size() + 1) * (3 * 128 * 256 * 9 / 16) +
                      2 * 6 * 256 * 2;
  EXPECT_EQ(r.bytes, want);
}

TEST(MoeGpuTest, GroupedMmaGivesTheSameBitsEveryRun) {
  SKIP_WITHOUT_GPU();
  const MoeProblem p = Small(9, 19);
  const MoeRunResult a = RunMoeLayer(p, Options("grouped_mma", {64, 128}));
  const MoeRunResult b =
      RunMoeLayer(p, Options("grouped_mma", {64, 128}, true));
  ASSERT_EQ(a.status, RunStatus::kOk) << a.message;
  ASSERT_EQ(b.status, RunStatus::kOk) << b.message;
  EXPECT_EQ(a.output, b.output);
}

// Serving batches with uneven routing, on dims every grouped_wgmma tile fits
// (K 1024 and 512; 64 experts): the router bias makes the routing uniform,
// Zipf-skewed, a replayed histogram with never-chosen experts, or one
// expert that every token takes. grouped_wgmma (every tile, graph off and
// on) against the trusted path, and on sampled tokens against the CPU in
// double; and the same bits every run (a fixed-order combine).
MoeProblem Serving(int batch, const std::string& routing) {
  MoeDims dims = kSmallDims;
  dims.hidden = 1024;
  dims.moe_inter = 512;
  dims.num_experts = 64;
  dims.top_k = 8;
  MoeProblem p = Small(batch, 29, {}, dims);
  for (int e = 0; e < dims.num_experts; ++e) {
    const int r = (e * 37) % dims.num_experts + 1;  // a fixed permutation
    if (routing == "skewed") p.router_bias[e] = 0.5f / r;
    if (routing == "replayed") {  // a histogram with empty bins
      p.router_bias[e] = e % 5 == 0 ? -10.0f : 0.5f * ((e * 13) % 7) / 6.0f;
    }
    if (routing == "one_hot") p.router_bias[e] = e == 3 ? 10.0f : 0.0f;
  }
  return p;
}

// The trusted path's output for p (a grouped_mma run that computes it).
std::vector<double> TrustedOutput(const MoeProblem& p) {
  MoeRunOptions ro = Options("grouped_mma");
  ro.compute_reference = true;
  const MoeRunResult ref = RunMoeLayer(p, ro);
  EXPECT_EQ(ref.status, RunStatus::kOk) << ref.message;
  return ToDouble(ref.reference_output);
}

// `backend` with tile t on p, checked against `want`; its output (empty
// when it did not run).
std::vector<float> RunMatching(const MoeProblem& p, const std::string& backend,
                               const Tile& t, bool graph,
                               const std::vector<double>& want) {
  const MoeRunResult r = RunMoeLayer(p, Options(backend, t, graph));
  EXPECT_EQ(r.status, RunStatus::kOk) << r.message;
  if (r.status != RunStatus::kOk) return {};
  const auto [rel_l2, worst] = Errors(r.output, want);
  EXPECT_LT(rel_l2, kTolerance);
  EXPECT_LT(worst, kTolerance);
  return r.output;
}

// `backend` (its default tile) on p against the CPU in double on a few
// tokens (the first, a middle one, the last) and every row.
void ExpectSampledTokensMatchTheCpu(const MoeProblem& p,
                                    const std::string& backend) {
  const std::vector<int> tokens = {0, p.batch / 2, p.batch - 1};
  std::vector<int> rows;
  for (int row = 0; row < p.dims.hidden; ++row) rows.push_back(row);
  const std::vector<double> cpu = cpu::OutputRows(p, tokens, rows, 4);
  const MoeRunResult r = RunMoeLayer(p, Options(backend));
  ASSERT_EQ(r.status, RunStatus::kOk) << r.message;
  std::vector<float> picked;
  for (int t : tokens) {
    picked.insert(picked.end(), r.output.begin() + t * p.dims.hidden,
                  r.output.begin() + (t + 1) * p.dims.hidden);
  }
  const auto [rel_l2, worst] = Errors(picked, cpu);
  EXPECT_LT(rel_l2, kTolerance) << backend << " batch " << p.batch;
  EXPECT_LT(worst, kTolerance) << backend << " batch " << p.batch;
}

// Under each routing of Serving() at each batch: `backend` at every tile,
// graph off and on, against the trusted path (`also` given each output),
// then sampled tokens against the CPU in double.
using ServingCheck = std::function<void(const MoeProblem&, const Tile&, bool,
                                        const std::vector<float>&)>;
void ExpectServingRunsMatch(const std::string& backend,
                            const std::vector<int>& batches,
                            const ServingCheck& also) {
  const BackendDescriptor& info = *backends::FindBackend(backend);
  for (const int batch : batches) {
    for (const std::string routing :
         {"uniform", "skewed", "replayed", "one_hot"}) {
      const MoeProblem p = Serving(batch, routing);
      const std::vector<double> want = TrustedOutput(p);
      ASSERT_FALSE(want.empty());
      for (const Tile& t : info.tiles) {
        ASSERT_TRUE(Fits(info, p, t)) << backends::TileText(t);
        for (const bool graph : {false, true}) {
          SCOPED_TRACE(routing + " batch " + std::to_string(batch) + " " +
                       backends::TileText(t) + (graph ? " graph" : ""));
          const std::vector<float> out =
              RunMatching(p, backend, t, graph, want);
          ASSERT_FALSE(out.empty());
          if (also) also(p, t, graph, out);
        }
      }
      SCOPED_TRACE(routing);
      ExpectSampledTokensMatchTheCpu(p, backend);
    }
  }
}

// grouped_wgmma gives the same bits every run (a fixed-order combine).
TEST(MoeGpuTest, GroupedWgmmaHandlesUnevenRoutingAtServingBatches) {
  SKIP_WITHOUT_GPU();
  ExpectServingRunsMatch("grouped_wgmma", {64, 200},
                         [](const MoeProblem& p, const Tile& t, bool graph,
                            const std::vector<float>& out) {
                           const MoeRunResult again = RunMoeLayer(
                               p, Options("grouped_wgmma", t, graph));
                           EXPECT_EQ(out, again.output);
                         });
}

// fused_gemv above 16 tokens streams the slots of more than 8 tokens (the
// shared expert, and a routed expert every token takes under one_hot)
// with a kernel of several n-tiles and the rest with one of a single
// n-tile: the router must put the wide slots first, or the narrow kernel
// would drop the tokens past its 8. Above 64 tokens the wide kernel walks
// 64-token tiles (65: a last tile of one token; 130: the ring path's two;
// 512 under one_hot: one expert's 8 tiles). Every tile, graph off and on,
// against the trusted path.
TEST(MoeGpuTest, FusedGemvSplitsWideAndNarrowSlots) {
  SKIP_WITHOUT_GPU();
  const BackendDescriptor& info = *backends::FindBackend("fused_gemv");
  for (const int batch : {12, 17, 40, 64, 65, 130, 512}) {
    for (const std::string routing : {"uniform", "skewed", "one_hot"}) {
      const MoeProblem p = Serving(batch, routing);
      const std::vector<double> want = TrustedOutput(p);
      ASSERT_FALSE(want.empty());
      int tiles_run = 0;
      for (const Tile& t : info.tiles) {
        if (!Fits(info, p, t)) continue;
        ++tiles_run;
        for (const bool graph : {false, true}) {
          SCOPED_TRACE(routing + " batch " + std::to_string(batch) + " " +
                       backends::TileText(t) + (graph ? " graph" : ""));
          EXPECT_FALSE(RunMatching(p, "fused_gemv", t, graph, want).empty());
        }
      }
      EXPECT_EQ(tiles_run, static_cast<int>(info.tiles.size()));
    }
  }
}

// fused_gemv_wgmma: the wide slots (the shared expert, hot experts, the
// expert every token takes under one_hot) by grouped_wgmma's kernel, the
// rest by fused_gemv's narrow one, both adding into y: every tile, graph off
// and on, against the trusted path, from the first batch with wide slots
// (17) to 512, under uniform, skewed, replayed (never-chosen experts) and
// one-expert routing; sampled tokens against the CPU in double; and 16
// tokens refused with the reason.
TEST(MoeGpuTest, FusedGemvWgmmaSplitsTheSlotsBetweenItsKernels) {
  SKIP_WITHOUT_GPU();
  ExpectServingRunsMatch("fused_gemv_wgmma", {17, 40, 64, 130, 512}, nullptr);
  const MoeRunResult r =
      RunMoeLayer(Serving(16, "uniform"), Options("fused_gemv_wgmma"));
  EXPECT_EQ(r.status, RunStatus::kCannotImplement);
  EXPECT_THAT(r.message, HasSubstr("at least 17 tokens"));
}

}  // namespace
}  // namespace moetune::gpu
