// kernels/cuda/step/mla.cuh LaunchIndexerScores: the DSA indexer's scores
// -- on tensor cores at GLM-5's 32 heads x 128 dims (index_scores_mma.cuh),
// on CUDA cores at head dims the tensor-core kernel does not take -- against
// a CPU evaluation in double over the same E4M3 keys, the new token's float
// key included. Skips without a device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/moe/moe_gpu.h"
#include "kernels/model/nvfp4_format.h"
#include "tests/kernels/cuda/host_values.h"
#include "tests/kernels/cuda/step_kernels_runner.h"

namespace moetune::gpu::testing {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

// A finite E4M3 byte: 0x7f / 0xff (NaN) never drawn.
uint8_t FiniteE4m3(Values& v) {
  for (;;) {
    const uint8_t b = static_cast<uint8_t>((v.Next() + 1.0f) * 127.99f);
    if ((b & 0x7f) != 0x7f) return b;
  }
}

// The scores' inputs (ScoresShape's layouts), with queries whose scale
// varies so that the FP16 split is tried on large values too.
struct ScoresData {
  std::vector<float> q, w, fresh;
  std::vector<uint8_t> keys;
};

ScoresData MakeData(const ScoresShape& sh) {
  Values v(77u + sh.dim + sh.context);
  ScoresData d;
  d.q.resize(static_cast<size_t>(sh.batch) * sh.heads * sh.dim);
  for (size_t i = 0; i < d.q.size(); ++i) {
    d.q[i] = v.Next() * (i % 61 == 0 ? 40.0f : 1.5f);
  }
  d.w.resize(static_cast<size_t>(sh.batch) * sh.heads);
  for (float& x : d.w) x = v.Next();
  d.keys.resize(static_cast<size_t>(sh.batch) * sh.key_stride * sh.dim);
  for (uint8_t& k : d.keys) k = FiniteE4m3(v);
  d.fresh.resize(static_cast<size_t>(sh.batch) * sh.dim);
  for (float& x : d.fresh) x = v.Next();
  return d;
}

// Token t's score of sequence b in double, and the magnitude of its terms
// (sum over heads of |w| x the dot product's |terms|).
void Expected(const ScoresShape& sh, const ScoresData& d, int b, int t,
              double* want, double* mag) {
  *want = *mag = 0;
  for (int h = 0; h < sh.heads; ++h) {
    const float* qh =
        d.q.data() + (static_cast<size_t>(b) * sh.heads + h) * sh.dim;
    double dot = 0, dot_mag = 0;
    for (int i = 0; i < sh.dim; ++i) {
      const size_t at =
          (static_cast<size_t>(b) * sh.key_stride + t) * sh.dim + i;
      const double k = t < sh.context
                           ? nvfp4::E4M3ToFloat(d.keys[at])
                           : d.fresh[static_cast<size_t>(b) * sh.dim + i];
      dot += double{qh[i]} * k;
      dot_mag += std::fabs(double{qh[i]} * k);
    }
    const double wh = double{d.w[b * sh.heads + h]} * sh.w_scale;
    *want += wh * std::max(dot * sh.dot_scale, 0.0);
    *mag += std::fabs(wh) * dot_mag * sh.dot_scale;
  }
}

// Runs the scores and checks each against double to 1e-5 of its terms'
// magnitude, printing the worst error.
void ExpectScoresMatch(const ScoresShape& sh) {
  SCOPED_TRACE(::testing::Message()
               << "heads " << sh.heads << " dim " << sh.dim << " context "
               << sh.context << " batch " << sh.batch);
  const ScoresData d = MakeData(sh);
  std::vector<float> got;
  ASSERT_EQ(RunIndexerScores(sh, d.q, d.w, d.keys, d.fresh, &got), "");
  double worst = 0;
  int bad = 0;
  for (int b = 0; b < sh.batch; ++b) {
    for (int t = 0; t <= sh.context; ++t) {
      double want, mag;
      Expected(sh, d, b, t, &want, &mag);
      const double g = got[static_cast<size_t>(b) * (sh.context + 1) + t];
      worst = std::max(worst, std::fabs(g - want) / (mag + 1e-30));
      if (std::fabs(g - want) > 1e-5 * mag + 1e-30 && ++bad <= 5) {
        ADD_FAILURE() << "sequence " << b << " token " << t << ": " << g
                      << " want " << want << " (magnitude " << mag << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0);
  std::printf(
      "scores heads %d dim %d context %d batch %d: worst error "
      "%.2e of the magnitude\n",
      sh.heads, sh.dim, sh.context, sh.batch, worst);
}

ScoresShape Shape(int heads, int dim, int context, int batch) {
  ScoresShape s;
  s.heads = heads;
  s.dim = dim;
  s.context = context;
  s.batch = batch;
  s.key_stride = context + 3;  // a cache with room left
  s.w_scale = 1.0f / std::sqrt(static_cast<float>(heads));
  s.dot_scale = 1.0f / std::sqrt(static_cast<float>(dim));
  return s;
}

// GLM-5's indexer (32 heads x 128 dims) on tensor cores: contexts that end
// inside a warp's 16 tokens and a block's 64, one token, none.
TEST(IndexScoresGpuTest, Glm5ScoresMatchADoubleEvaluation) {
  SKIP_WITHOUT_GPU();
  ASSERT_TRUE(TensorCoreScoresTake(Shape(32, 128, 100, 1)));
  for (int context : {0, 1, 13, 64, 100, 4096}) {
    ExpectScoresMatch(Shape(32, 128, context, 2));
  }
  ExpectScoresMatch(Shape(32, 128, 700, 5));
  // Blocks of 2 and 4 token tiles (chosen where the blocks still fill an
  // H200's SMs twice), the context ending inside a block.
  ExpectScoresMatch(Shape(32, 128, 4090, 3));
  ExpectScoresMatch(Shape(32, 128, 4000, 8));
}

// Blocks of several rounds of four token tiles (on an H200: 2 rounds at
// 16 sequences x 4000 tokens, 4 at 32 x 4090, 8 at 16 x 16001), contexts
// that end inside a round and inside a block's last round.
TEST(IndexScoresGpuTest, RoundsOfTilesMatch) {
  SKIP_WITHOUT_GPU();
  ExpectScoresMatch(Shape(32, 128, 4000, 16));
  ExpectScoresMatch(Shape(32, 128, 4090, 32));
  ExpectScoresMatch(Shape(32, 128, 16001, 16));
}

// Fewer heads than 32 (zero-padded) and the other head dims it is built for.
TEST(IndexScoresGpuTest, OtherHeadCountsAndDims) {
  SKIP_WITHOUT_GPU();
  ExpectScoresMatch(Shape(4, 128, 200, 3));
  ExpectScoresMatch(Shape(32, 64, 150, 2));
  ExpectScoresMatch(Shape(16, 256, 90, 2));
}

// Head dims the tensor-core kernel does not take run on CUDA cores.
TEST(IndexScoresGpuTest, TheCudaCoreKernelTakesTheRest) {
  SKIP_WITHOUT_GPU();
  EXPECT_FALSE(TensorCoreScoresTake(Shape(4, 32, 40, 2)));
  ExpectScoresMatch(Shape(4, 32, 40, 2));
  ExpectScoresMatch(Shape(32, 48, 70, 1));
}

}  // namespace
}  // namespace moetune::gpu::testing
