// kernels/cuda/step/gemv.cuh LaunchGemvNvfp4: the NVFP4 GEMV -- on tensor
// cores from the tensor-core batch (gemv_nvfp4_mma.cuh), on CUDA cores
// below it and for shapes it does not take -- against a CPU evaluation in
// double: plain and per-head (W_UV) products, ragged rows, batches over a
// pass of 32 sequences. Skips without a device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
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

constexpr float kTensorScale = 0.37f;

struct Nvfp4Data {
  std::vector<uint8_t> codes, scales;
  std::vector<float> x;
};

// Every E2M1 code; E4M3 scales from 2^-6 to 2^5 (finite, no NaN).
Nvfp4Data MakeData(const GemvShape& s, int w_rows, int64_t x_len) {
  Values v(4321u + s.rows + s.batch + s.k);
  Nvfp4Data d;
  d.codes.resize(static_cast<size_t>(w_rows) * s.k / 2);
  for (uint8_t& c : d.codes) c = static_cast<uint8_t>((v.Next() + 1) * 127.99f);
  d.scales.resize(static_cast<size_t>(w_rows) * s.k / 16);
  for (uint8_t& c : d.scales) {
    c = static_cast<uint8_t>(0x08 + (v.Next() + 1) * 43.99f);  // exp 1..12
  }
  d.x.resize(x_len);
  for (size_t i = 0; i < d.x.size(); ++i) {
    d.x[i] = v.Next() * (i % 89 == 0 ? 200.0f : 1.5f);
  }
  return d;
}

// y[b][r] in double and the magnitude of its products.
void Expected(const GemvShape& s, const Nvfp4Data& d, int r, int b,
              double* want, double* mag) {
  const int rpx = s.rows_per_x ? s.rows_per_x : s.rows;
  const int group = r / rpx;
  const int64_t w_row = group * s.w_group_stride + s.w_group_offset + r % rpx;
  const float* x = d.x.data() + group * s.x_group_stride + b * s.x_stride;
  *want = *mag = 0;
  for (int i = 0; i < s.k; ++i) {
    const uint8_t byte = d.codes[w_row * (s.k / 2) + i / 2];
    const double w = nvfp4::E2M1ToFloat(i % 2 ? byte >> 4 : byte & 0xf) *
                     nvfp4::E4M3ToFloat(d.scales[w_row * (s.k / 16) + i / 16]);
    *want += w * x[i] * kTensorScale;
    *mag += std::fabs(w * x[i] * kTensorScale);
  }
}

// Runs the GEMV and checks every output to 5e-7 of its products' magnitude:
// the CUDA-core kernel's float sums reach 1.2e-7 on 512-K rows, the tensor
// cores' (which truncate each 16-K group's products below the largest)
// 3.8e-7 (gemv_nvfp4_mma.cu), far inside what the step's checks tolerate
// (a 1e-6 perturbation passes them).
void ExpectMatches(const GemvShape& s, int w_rows, int64_t x_len) {
  SCOPED_TRACE(::testing::Message()
               << "rows " << s.rows << " k " << s.k << " batch " << s.batch);
  const Nvfp4Data d = MakeData(s, w_rows, x_len);
  std::vector<float> y;
  ASSERT_EQ(RunGemvNvfp4(s, d.codes, d.scales, kTensorScale, d.x, &y), "");
  double worst = 0;
  int bad = 0;
  for (int b = 0; b < s.batch; ++b) {
    for (int r = 0; r < s.rows; ++r) {
      double want, mag;
      Expected(s, d, r, b, &want, &mag);
      const double got = y[static_cast<size_t>(b) * s.rows + r];
      worst = std::max(worst, std::fabs(got - want) / (mag + 1e-30));
      if (std::fabs(got - want) > 5e-7 * mag + 1e-30 && ++bad <= 5) {
        ADD_FAILURE() << "row " << r << " sequence " << b << ": " << got
                      << " want " << want;
      }
    }
  }
  EXPECT_EQ(bad, 0);
  std::printf("nvfp4 gemv rows %d k %d batch %d: worst error %.2e\n", s.rows,
              s.k, s.batch, worst);
}

GemvShape Plain(int rows, int k, int batch) {
  GemvShape s;
  s.rows = rows;
  s.k = k;
  s.batch = batch;
  s.x_stride = k;
  return s;
}

TEST(GemvNvfp4GpuTest, PlainProductsMatchADoubleEvaluation) {
  SKIP_WITHOUT_GPU();
  ASSERT_TRUE(TensorCoresTakeNvfp4(Plain(300, 6144, 8)));
  for (int batch : {1, 2, TensorCoreMinBatch(), 8, 9, 32, 37}) {
    ExpectMatches(Plain(300, 6144, batch), 300, int64_t{batch} * 6144);
  }
  ExpectMatches(Plain(40, 1536, 8), 40, 8 * 1536);
}

// One and two sequences take their own kernel (gemv_nvfp4_few.cu): the
// dense MLP's shapes at TP8 (gate_up's rows split over two K parts, down's
// 48 units leaving half the lanes one), and K of 96 and 800 (a last 256-K
// chunk of 96 and of 32). At two
// sequences the dense shapes' grids are over five blocks an SM on an H200
// (768 blocks), so they take the one-sequence-a-pass form and the small
// one the two-a-pass form: both are checked.
TEST(GemvNvfp4GpuTest, OneAndTwoSequencesMatchAtTheStepsShapes) {
  SKIP_WITHOUT_GPU();
  for (int batch : {1, 2}) {
    ExpectMatches(Plain(3072, 6144, batch), 3072, int64_t{batch} * 6144);
    ExpectMatches(Plain(6144, 1536, batch), 6144, int64_t{batch} * 1536);
    ExpectMatches(Plain(37, 96, batch), 37, int64_t{batch} * 96);
    ExpectMatches(Plain(37, 800, batch), 37, int64_t{batch} * 800);
  }
}

// W_UV's shape over NVFP4 kv_b: 4 heads, each 64 rows of every other 64-row
// block (512 weight rows), each reading its own head's input.
GemvShape PerHead(int batch) {
  GemvShape s = Plain(256, 512, batch);
  s.rows_per_x = 64;
  s.w_group_stride = 128;
  s.w_group_offset = 64;
  s.x_group_stride = 512;
  s.x_stride = 4 * 512;
  return s;
}

TEST(GemvNvfp4GpuTest, PerHeadProductsReadTheirOwnInputs) {
  SKIP_WITHOUT_GPU();
  for (int batch : {1, 8, 32}) {
    const GemvShape s = PerHead(batch);
    ASSERT_TRUE(TensorCoresTakeNvfp4(s));
    ExpectMatches(s, 512, int64_t{batch} * 4 * 512);
  }
}

// The inputs split once before the kernel (the step's scratch): the same
// products in the same order, so the same bits as the kernel that splits
// them in every warp, and the same match against double; plain and
// per-head shapes, two and four n-tiles a pass, a batch over a pass.
TEST(GemvNvfp4GpuTest, InputsSplitOnceGiveTheSameBits) {
  SKIP_WITHOUT_GPU();
  std::vector<GemvShape> shapes;
  for (int batch : {Nvfp4SplitOnceFromBatch(), 16, 32, 37}) {
    shapes.push_back(Plain(300, 6144, batch));
    shapes.push_back(PerHead(batch));
  }
  shapes.push_back(Plain(6144, 1536, 32));  // the dense MLP's down at TP8
  for (GemvShape s : shapes) {
    SCOPED_TRACE(::testing::Message()
                 << "rows " << s.rows << " batch " << s.batch << " rows_per_x "
                 << s.rows_per_x);
    ASSERT_TRUE(TensorCoresTakeNvfp4(s));
    const int w_rows = s.rows_per_x ? 2 * s.rows : s.rows;
    const int64_t x_len =
        s.rows_per_x ? int64_t{s.batch} * 4 * 512 : int64_t{s.batch} * s.k;
    const Nvfp4Data d = MakeData(s, w_rows, x_len);
    std::vector<float> plain, split;
    ASSERT_EQ(RunGemvNvfp4(s, d.codes, d.scales, kTensorScale, d.x, &plain),
              "");
    s.x_parts = true;
    ASSERT_EQ(RunGemvNvfp4(s, d.codes, d.scales, kTensorScale, d.x, &split),
              "");
    ASSERT_EQ(plain.size(), split.size());
    int differ = 0;
    for (size_t i = 0; i < plain.size(); ++i) {
      if (std::memcmp(&plain[i], &split[i], sizeof(float)) != 0 &&
          ++differ <= 5) {
        ADD_FAILURE() << "output " << i << ": " << split[i] << " against "
                      << plain[i];
      }
    }
    EXPECT_EQ(differ, 0);
    ExpectMatches(s, w_rows, x_len);
  }
}

// k not a multiple of 128: the CUDA-core kernel.
TEST(GemvNvfp4GpuTest, ShapesTheTensorCoresDoNotTakeStillMatch) {
  SKIP_WITHOUT_GPU();
  EXPECT_FALSE(TensorCoresTakeNvfp4(Plain(32, 96, 8)));
  ExpectMatches(Plain(32, 96, 8), 32, 8 * 96);
}

}  // namespace
}  // namespace moetune::gpu::testing
