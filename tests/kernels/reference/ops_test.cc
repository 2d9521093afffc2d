// The basic ops, on 4-element vectors computed by hand.
#include "kernels/reference/ops.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace moetune::ref {
namespace {

TEST(OpsTest, DotAccumulatesInDouble) {
  const float a[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  const float b[4] = {0.5f, -1.0f, 2.0f, 0.25f};
  EXPECT_EQ(Dot(a, b, 4), 0.5 - 2.0 + 6.0 + 1.0);
  // 2^24 + 1 + ... is lost in float, kept in double.
  const float big[3] = {16777216.0f, 1.0f, 1.0f};
  const float ones[3] = {1.0f, 1.0f, 1.0f};
  EXPECT_EQ(Dot(big, ones, 3), 16777218.0);
}

TEST(OpsTest, RmsNormByHand) {
  const float x[4] = {3.0f, -3.0f, 3.0f, -3.0f};  // rms 3
  const float gamma[4] = {1.0f, 2.0f, 0.5f, 1.0f};
  float out[4];
  RmsNorm(x, gamma, 4, 0.0f, out);
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[1], -2.0f);
  EXPECT_FLOAT_EQ(out[2], 0.5f);
  EXPECT_FLOAT_EQ(out[3], -1.0f);
  // mean square (1+4+9+16)/4 = 7.5.
  const float y[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  const float unit[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  RmsNorm(y, unit, 4, 0.0f, out);
  EXPECT_NEAR(out[0], 0.36514837f, 1e-7);
  EXPECT_NEAR(out[1], 0.73029674f, 1e-7);
  EXPECT_NEAR(out[2], 1.09544512f, 1e-7);
  EXPECT_NEAR(out[3], 1.46059349f, 1e-7);
  // eps is added to the mean square: sqrt(1 + 3) = 2.
  RmsNorm(unit, unit, 4, 3.0f, out);
  EXPECT_FLOAT_EQ(out[2], 0.5f);
}

TEST(OpsTest, LayerNormByHand) {
  // mean 2.5, biased variance 1.25.
  const float x[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  const float gamma[4] = {2.0f, 2.0f, 2.0f, 2.0f};
  const float beta[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  float out[4];
  LayerNorm(x, gamma, beta, 4, 0.0f, out);
  EXPECT_NEAR(out[0], 2 * -1.34164079f + 1, 1e-6);
  EXPECT_NEAR(out[1], 2 * -0.44721360f + 1, 1e-6);
  EXPECT_NEAR(out[2], 2 * 0.44721360f + 1, 1e-6);
  EXPECT_NEAR(out[3], 2 * 1.34164079f + 1, 1e-6);
  LayerNorm(x, gamma, nullptr, 4, 0.0f, out);  // no bias
  EXPECT_NEAR(out[3], 2 * 1.34164079f, 1e-6);
}

// Interleaved convention (GLM-5's), dim 4: pairs (0, 1) and (2, 3);
// frequencies theta^(-0/4) = 1 and 10000^(-2/4) = 0.01.
TEST(OpsTest, RopeIsInterleavedByHand) {
  float e0[4] = {1.0f, 0.0f, 0.0f, 0.0f};
  ApplyRope(e0, 4, 1, 10000.0f);
  EXPECT_NEAR(e0[0], 0.54030231f, 1e-7);  // cos 1
  EXPECT_NEAR(e0[1], 0.84147098f, 1e-7);  // sin 1: half-split puts it at [2]
  EXPECT_EQ(e0[2], 0.0f);
  EXPECT_EQ(e0[3], 0.0f);
  float e2[4] = {0.0f, 0.0f, 1.0f, 0.0f};
  ApplyRope(e2, 4, 1, 10000.0f);
  EXPECT_NEAR(e2[2], 0.99995000f, 1e-7);  // cos 0.01
  EXPECT_NEAR(e2[3], 0.00999983f, 1e-7);  // sin 0.01
  float x[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  ApplyRope(x, 4, 2, 10000.0f);           // angles 2 and 0.02
  EXPECT_NEAR(x[0], -2.23474169f, 1e-6);  // 1 cos2 - 2 sin2
  EXPECT_NEAR(x[1], 0.07700375f, 1e-6);   // 2 cos2 + 1 sin2
  EXPECT_NEAR(x[2], 2.91940535f, 1e-6);   // 3 cos.02 - 4 sin.02
  EXPECT_NEAR(x[3], 4.05919603f, 1e-6);   // 4 cos.02 + 3 sin.02
}

TEST(OpsTest, RopeAtPositionZeroIsIdentity) {
  float x[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  ApplyRope(x, 4, 0, 10000.0f);
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[1], 2.0f);
  EXPECT_EQ(x[2], 3.0f);
  EXPECT_EQ(x[3], 4.0f);
}

TEST(OpsTest, SoftmaxByHand) {
  float x[3] = {1.0f, 2.0f, 3.0f};
  Softmax(x, 3);
  EXPECT_NEAR(x[0], 0.09003057f, 1e-7);
  EXPECT_NEAR(x[1], 0.24472847f, 1e-7);
  EXPECT_NEAR(x[2], 0.66524096f, 1e-7);
  float big[2] = {1000.0f, 1000.0f};  // no overflow: max is subtracted
  Softmax(big, 2);
  EXPECT_EQ(big[0], 0.5f);
  EXPECT_EQ(big[1], 0.5f);
}

TEST(OpsTest, SigmoidAndSiluByHand) {
  EXPECT_EQ(Sigmoid(0.0f), 0.5f);
  EXPECT_NEAR(Sigmoid(1.0f), 0.73105858f, 1e-7);
  EXPECT_EQ(Silu(0.0f), 0.0f);
  EXPECT_NEAR(Silu(1.0f), 0.73105858f, 1e-7);
  EXPECT_NEAR(Silu(-1.0f), -0.26894142f, 1e-7);
  EXPECT_NEAR(Silu(2.0f), 2.0f * 0.88079708f, 1e-6);
}

TEST(OpsTest, RoundToBf16IsNearestEven) {
  EXPECT_EQ(RoundToBf16(1.0f), 1.0f);
  // BF16 has 7 mantissa bits: 1 + 2^-8 is halfway between 1 and 1 + 2^-7
  // and goes to the even one (1); 1 + 3 * 2^-8 goes to 1 + 2^-6.
  EXPECT_EQ(RoundToBf16(1.0f + 0.00390625f), 1.0f);
  EXPECT_EQ(RoundToBf16(1.0f + 3 * 0.00390625f), 1.015625f);
  EXPECT_EQ(RoundToBf16(1.0f + 0.005f), 1.0078125f);  // above half: up
  EXPECT_EQ(RoundToBf16(-2.5f), -2.5f);
  EXPECT_TRUE(std::isinf(RoundToBf16(INFINITY)));
}

}  // namespace
}  // namespace moetune::ref
