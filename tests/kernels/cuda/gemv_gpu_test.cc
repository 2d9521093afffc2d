// kernels/cuda/step/gemv.cuh: the step's BF16 GEMV -- the CUDA-core kernel
// (batches below the tensor-core one's, shapes it does not take), the
// tensor-core one (gemv_mma.cuh) and the wgmma one (gemv_wgmma.cuh) --
// against a CPU evaluation in double, for plain, strided, segmented and
// per-head (W_UV) products, ragged rows and batches that fill a pass of 32
// sequences partly and over. Skips without a device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/moe/moe_gpu.h"
#include "tests/kernels/cuda/host_values.h"
#include "tests/kernels/cuda/step_kernels_runner.h"

namespace moetune::gpu::testing {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

// Host data: W [w_rows][k] BF16 and x of x_len floats, with an input scale
// that varies (the BF16 split of the inputs tried on large values too).
struct Case {
  GemvShape shape;
  int w_rows = 0;     // 0 = rows
  int64_t x_len = 0;  // 0 = batch * x_stride
};

// y[b][r] of the GEMV's formula in double, and the sum of |products| (the
// scale an error is measured against).
void Expected(const GemvShape& s, const std::vector<uint16_t>& w,
              const std::vector<float>& x, int r, int b, double* want,
              double* magnitude) {
  const int rpx = s.rows_per_x ? s.rows_per_x : s.rows;
  const int group = r / rpx;
  const int64_t w_row = group * s.w_group_stride + s.w_group_offset + r % rpx;
  const float* xr = x.data() + group * s.x_group_stride + b * s.x_stride;
  double sum = 0, mag = 0;
  for (int i = 0; i < s.k; ++i) {
    const double p = FromBf16(w[w_row * s.k + i]) * xr[i];
    sum += p;
    mag += std::fabs(p);
  }
  *want = sum;
  *magnitude = mag;
}

// Runs the GEMV and checks every output to `bound` of its products'
// magnitude (2e-7: a float sum's own error, 3e-8 at k = 6144; inputs split
// into two BF16 parts reached 2.5e-6), printing the worst and the mean
// signed error, so a bias shows.
void ExpectMatches(const Case& c, double bound = 2e-7) {
  const GemvShape& s = c.shape;
  SCOPED_TRACE(::testing::Message()
               << "rows " << s.rows << " k " << s.k << " batch " << s.batch);
  Values v(1234u + s.rows * 7 + s.batch);
  std::vector<uint16_t> w(static_cast<size_t>(c.w_rows ? c.w_rows : s.rows) *
                          s.k);
  for (auto& e : w) e = ToBf16(v.Next() * 0.05f);
  std::vector<float> x(c.x_len ? c.x_len : s.batch * s.x_stride);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = v.Next() * (i % 97 == 0 ? 300.0f : 2.0f);
  }
  std::vector<std::vector<float>> y;
  ASSERT_EQ(RunGemvBf16(s, w, x, &y), "");
  int first = 0, bad = 0;
  double worst = 0, signed_sum = 0;
  for (const std::vector<float>& out : y) {
    const int rows = static_cast<int>(out.size()) / s.batch;
    for (int b = 0; b < s.batch; ++b) {
      for (int r = 0; r < rows; ++r) {
        double want, mag;
        Expected(s, w, x, first + r, b, &want, &mag);
        const double got = out[static_cast<size_t>(b) * rows + r];
        worst = std::max(worst, std::fabs(got - want) / (mag + 1e-30));
        signed_sum += (got - want) / (mag + 1e-30);
        if (std::fabs(got - want) > bound * mag + 1e-30 && ++bad <= 5) {
          ADD_FAILURE() << "row " << first + r << " sequence " << b << ": "
                        << got << " want " << want << " (magnitude " << mag
                        << ")";
        }
      }
    }
    first += rows;
  }
  EXPECT_EQ(first, s.rows);
  EXPECT_EQ(bad, 0);
  std::printf(
      "gemv rows %d k %d batch %d: worst error %.2e, mean %.2e of "
      "the magnitude\n",
      s.rows, s.k, s.batch, worst,
      signed_sum / (static_cast<double>(s.rows) * s.batch));
}

// The wgmma GEMV's bound (LaunchGemvBf16 gives it batches WgmmaMinBatch()
// to 32): wgmma sums 32 K of products in the tensor cores before each float
// add, truncating below the largest (measured: 2.55e-7 worst of 1.1 M
// outputs at k = 512, 7.5e-8 at k = 6144; mma.sync's 16-K steps 5e-8).
constexpr double kWgmmaBound = 4e-7;
double BoundFor(int batch) {
  return batch >= WgmmaMinBatch() && batch <= 32 ? kWgmmaBound : 2e-7;
}

Case Plain(int rows, int k, int batch) {
  Case c;
  c.shape.rows = rows;
  c.shape.k = k;
  c.shape.batch = batch;
  c.shape.x_stride = k;
  return c;
}

// Batches on both sides of the tensor-core GEMV's first batch and of its
// passes of 8, 16 and 32 sequences; rows not a multiple of 16.
TEST(GemvGpuTest, PlainProductsMatchADoubleEvaluation) {
  SKIP_WITHOUT_GPU();
  ASSERT_TRUE(TensorCoresTake(Plain(300, 6144, 8).shape));
  for (int batch : {1, 2, TensorCoreMinBatch(), 3, 8, 9, 16, 17, 32, 37}) {
    ExpectMatches(Plain(300, 6144, batch), BoundFor(batch));
  }
  // Few rows and a long K (split over K in one block), and many rows.
  ExpectMatches(Plain(40, 2048, 8));
  ExpectMatches(Plain(4100, 512, 5));
}

// The one- and two-sequence GEMVs with their first rounds staged before
// the wait and without: K a multiple of a round, not one (the staged rounds
// then end inside a group), and shorter than the staged rounds (rows of a
// single part).
TEST(GemvGpuTest, WeightsAheadOrAfterTheWaitGiveTheSameProducts) {
  SKIP_WITHOUT_GPU();
  for (const bool ahead : {true, false}) {
    for (int batch : {1, 2}) {
      for (const auto& [rows, k] : {std::pair{300, 6144}, std::pair{77, 1000},
                                    std::pair{5000, 2048}, std::pair{9, 64}}) {
        Case c = Plain(rows, k, batch);
        c.shape.weights_ahead = ahead;
        SCOPED_TRACE(ahead ? "weights ahead" : "weights after the wait");
        ExpectMatches(c, BoundFor(batch));
      }
    }
  }
}

// The dense MLP's shapes at 6-17 sequences (the wgmma GEMV): tiny's gate_up
// (1024 rows, K 256: K over 2 ranks) and down (256 rows, K 512: 4 ranks), and
// a TP8 slice of GLM-5's (3072 x 6144 and 6144 x 1536: 8 and 4 ranks).
TEST(GemvGpuTest, DenseMlpShapesMatch) {
  SKIP_WITHOUT_GPU();
  for (int batch : {6, 8, 11, 16, 17}) {
    ExpectMatches(Plain(1024, 256, batch), BoundFor(batch));
    ExpectMatches(Plain(256, 512, batch), BoundFor(batch));
  }
  ExpectMatches(Plain(3072, 6144, 11), BoundFor(11));
  ExpectMatches(Plain(6144, 1536, 11), BoundFor(11));
}

// Inputs further apart than k (a strided view of a wider buffer).
TEST(GemvGpuTest, StridedInputsMatch) {
  SKIP_WITHOUT_GPU();
  Case c = Plain(64, 1024, 6);
  c.shape.x_stride = 1536;
  ExpectMatches(c);
}

// One launch writing three matrices' rows to their own outputs.
TEST(GemvGpuTest, SegmentsGoToTheirOwnOutputs) {
  SKIP_WITHOUT_GPU();
  for (int batch : {1, 4, 20}) {
    Case c = Plain(100 + 37 + 163, 1024, batch);
    c.shape.segments = {100, 37, 163};
    ExpectMatches(c, BoundFor(batch));
  }
}

// W_UK's absorption of the queries against double, to 2e-7 of the
// products' magnitude: GLM-5's TP8 rank (8 heads, nope 192, kv_lora 512),
// one and two sequences (a block a column run of one sequence), 8, 11 and
// 32 (blocks of 8 sequences, four columns a thread), and a head count and
// nope that leave rows and sequences over.
TEST(GemvGpuTest, AbsorbedQueriesMatchADoubleEvaluation) {
  SKIP_WITHOUT_GPU();
  for (const AbsorbShape& base : {AbsorbShape{8, 192, 256, 512, 1, 256},
                                  AbsorbShape{3, 40, 8, 96, 1, 48}}) {
    for (int batch : {1, 2, 8, 11, 32}) {
      AbsorbShape s = base;
      s.batch = batch;
      SCOPED_TRACE(::testing::Message()
                   << "heads " << s.heads << " batch " << batch);
      Values v(7u + batch * 13 + s.heads);
      std::vector<uint16_t> w(static_cast<size_t>(s.heads) *
                              (s.nope + s.v_dim) * s.kv_lora);
      for (auto& e : w) e = ToBf16(v.Next() * 0.05f);
      std::vector<float> q(static_cast<size_t>(batch) * s.heads * s.q_head);
      for (auto& e : q) e = v.Next() * 2.0f;
      std::vector<float> got;
      ASSERT_EQ(RunAbsorbQuery(s, w, q, &got), "");
      int bad = 0;
      for (int b = 0; b < batch; ++b) {
        for (int h = 0; h < s.heads; ++h) {
          for (int j = 0; j < s.kv_lora; ++j) {
            double want = 0, mag = 0;
            for (int i = 0; i < s.nope; ++i) {
              const double p =
                  q[(static_cast<size_t>(b) * s.heads + h) * s.q_head + i] *
                  FromBf16(w[(static_cast<size_t>(h) * (s.nope + s.v_dim) + i) *
                                 s.kv_lora +
                             j]);
              want += p;
              mag += std::fabs(p);
            }
            const double g =
                got[(static_cast<size_t>(b) * s.heads + h) * s.kv_lora + j];
            if (std::fabs(g - want) > 2e-7 * mag + 1e-30 && ++bad <= 5) {
              ADD_FAILURE() << "sequence " << b << " head " << h << " column "
                            << j << ": " << g << " want " << want;
            }
          }
        }
      }
      EXPECT_EQ(bad, 0);
    }
  }
}

// W_UV's shape: 4 heads, each 64 rows of every other 64-row block of W,
// each reading its own head's input.
Case PerHead(int batch) {
  Case c = Plain(256, 512, batch);
  c.shape.rows_per_x = 64;
  c.shape.w_group_stride = 128;
  c.shape.w_group_offset = 64;
  c.shape.x_group_stride = 512;
  c.shape.x_stride = 4 * 512;
  c.w_rows = 512;
  return c;
}

TEST(GemvGpuTest, PerHeadProductsReadTheirOwnInputs) {
  SKIP_WITHOUT_GPU();
  for (int batch : {1, 8, 32}) {
    const Case c = PerHead(batch);
    ASSERT_TRUE(TensorCoresTake(c.shape));
    ExpectMatches(c, BoundFor(batch));
  }
}

// Two sequences (the CUDA-core kernel of two loads a lane) over short and
// long rows, rows in several K parts, rows not a multiple of a block's, and
// per-head groups of rows reading their own inputs.
TEST(GemvGpuTest, TwoSequencesMatchAcrossShapes) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    int rows, k;
  };
  for (const Shape& l :
       {Shape{1000, 512}, Shape{777, 2048}, Shape{300, 4096}, Shape{301, 6144},
        Shape{67, 16384}, Shape{50, 24000}, Shape{33, 20000}, Shape{90, 40}}) {
    SCOPED_TRACE(::testing::Message() << l.rows << " x " << l.k);
    ExpectMatches(Plain(l.rows, l.k, 2));
  }
  Case heads = Plain(80, 512, 2);
  heads.shape.rows_per_x = 20;
  heads.shape.w_group_stride = 40;
  heads.shape.x_group_stride = 512;
  heads.shape.x_stride = 4 * 512;
  heads.w_rows = 160;
  ExpectMatches(heads);
}

// The wgmma GEMV (gemv_wgmma.cuh), launched directly, at every n-tile count
// (1, 2 and 4 passes of 8 sequences, batches below LaunchGemvBf16's choice
// too) with K split over clusters of 8 and 4 blocks and none (300 x 6144,
// 100 x 1024, per-head 256 x 512, 34000 x 512: more row blocks than one
// wave), the step's own shapes (the input projections' 2816 x 6144: as many
// ranks as fill the GPU, 5 or 6 on an H200; o_proj's 6144 x 2048: 2), rows
// not a multiple of its blocks', segments.
TEST(GemvGpuTest, WgmmaProductsMatchAtEveryClusterSize) {
  SKIP_WITHOUT_GPU();
  if (!WgmmaTakes(Plain(300, 6144, 32).shape)) {
    GTEST_SKIP() << "the device has no wgmma (sm_90)";
  }
  for (int batch : {1, 5, 8, 9, 16, 17, 32}) {
    for (Case c : {Plain(300, 6144, batch), Plain(100, 1024, batch)}) {
      c.shape.force_wgmma = true;
      ExpectMatches(c, kWgmmaBound);
    }
  }
  for (int batch : {5, 32}) {
    Case c = Plain(34000, 512, batch);
    c.shape.force_wgmma = true;
    ExpectMatches(c, kWgmmaBound);
  }
  for (Case c : {Plain(2816, 6144, 32), Plain(6144, 2048, 8)}) {
    c.shape.force_wgmma = true;
    ExpectMatches(c, kWgmmaBound);
  }
  ExpectMatches(Plain(6144, 2048, 32), kWgmmaBound);
  Case heads = PerHead(20);
  heads.shape.force_wgmma = true;
  ExpectMatches(heads, kWgmmaBound);
  Case segments = Plain(100 + 37 + 163, 1024, 12);
  segments.shape.segments = {100, 37, 163};
  segments.shape.force_wgmma = true;
  ExpectMatches(segments, kWgmmaBound);
  Case straddling = heads;
  straddling.shape.rows_per_x = 32;  // a 64-row block would read two inputs
  EXPECT_FALSE(WgmmaTakes(straddling.shape));
  EXPECT_TRUE(WgmmaTakes(Plain(300, 6144, WgmmaMinBatch()).shape));
}

// Blocks of three warpgroups (192 rows) where they leave the busiest SM
// less to do than blocks of two (on an H200: the input projections' 2784
// x 6144 and lm_head-like 19360 rows; o_proj's 6144 x 2048 keeps two), and
// none where a block would cross an input (W_UV's 64 rows a head here).
TEST(GemvGpuTest, ThreeWarpgroupBlocksMatch) {
  SKIP_WITHOUT_GPU();
  if (!WgmmaTakes(Plain(6144, 2048, 32).shape)) {
    GTEST_SKIP() << "the device has no wgmma (sm_90)";
  }
  bool three = false;
  for (int batch : {6, 8, 16, 17, 32}) {
    for (const Case& c : {Plain(6144, 2048, batch), Plain(2784, 6144, batch),
                          Plain(19360, 512, batch)}) {
      const int warpgroups = WgmmaWarpgroups(c.shape);
      std::printf("rows %d k %d batch %d: %d warpgroups a block\n",
                  c.shape.rows, c.shape.k, batch, warpgroups);
      EXPECT_GE(warpgroups, 2);
      three = three || warpgroups == 3;
      ExpectMatches(c, kWgmmaBound);
    }
  }
  EXPECT_TRUE(three) << "no shape took blocks of three warpgroups";
  EXPECT_EQ(WgmmaWarpgroups(PerHead(32).shape), 1);
}

// Shapes the tensor-core GEMV does not take run on the CUDA-core one.
TEST(GemvGpuTest, ShapesTheTensorCoresDoNotTakeStillMatch) {
  SKIP_WITHOUT_GPU();
  const Case short_k = Plain(32, 40, 8);
  EXPECT_FALSE(TensorCoresTake(short_k.shape));
  ExpectMatches(short_k);
  Case heads = Plain(48, 64, 8);
  heads.shape.rows_per_x = 24;  // a 16-row tile would straddle two inputs
  heads.shape.w_group_stride = 24;
  heads.shape.x_group_stride = 64;
  heads.shape.x_stride = 2 * 64;
  EXPECT_FALSE(TensorCoresTake(heads.shape));
  ExpectMatches(heads);
}

}  // namespace
}  // namespace moetune::gpu::testing
