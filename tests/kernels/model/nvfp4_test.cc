// The NVFP4 format, the weight layout and the packed tensors of the
// reference, against hand values.
#include <cmath>
#include <cstring>

#include "gtest/gtest.h"
#include "kernels/model/nvfp4_format.h"
#include "kernels/model/weight_gen.h"
#include "kernels/reference/model_weights.h"
#include "kernels/reference/tensors.h"
#include "tests/kernels/reference/step_spec_util.h"

namespace moetune::ref {
namespace {

ref::StepSpec Spec(const char* preset) {
  return testing::PresetSpec(preset, 42);
}

TEST(Nvfp4FormatTest, E2M1TableByHand) {
  const float expected[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,
                              4.0f,  6.0f,  -0.0f, -0.5f, -1.0f, -1.5f,
                              -2.0f, -3.0f, -4.0f, -6.0f};
  for (uint32_t code = 0; code < 16; ++code) {
    EXPECT_EQ(nvfp4::E2M1ToFloat(code), expected[code]) << code;
    EXPECT_EQ(std::signbit(nvfp4::E2M1ToFloat(code)), code >= 8) << code;
  }
}

TEST(Nvfp4FormatTest, E4M3NormalsByHand) {
  EXPECT_EQ(nvfp4::E4M3ToFloat(0x38), 1.0f);       // e=7, m=0
  EXPECT_EQ(nvfp4::E4M3ToFloat(0x3c), 1.5f);       // e=7, m=4
  EXPECT_EQ(nvfp4::E4M3ToFloat(0x40), 2.0f);       // e=8
  EXPECT_EQ(nvfp4::E4M3ToFloat(0x2f), 0.46875f);   // e=5, m=7: 1.875/4
  EXPECT_EQ(nvfp4::E4M3ToFloat(0x08), 0.015625f);  // smallest normal 2^-6
  EXPECT_EQ(nvfp4::E4M3ToFloat(0x7e), 448.0f);     // largest: 2^8 * 1.75
  EXPECT_EQ(nvfp4::E4M3ToFloat(0xb8), -1.0f);
  EXPECT_EQ(nvfp4::E4M3ToFloat(0xfe), -448.0f);
}

TEST(Nvfp4FormatTest, E4M3SubnormalsZeroAndNaN) {
  EXPECT_EQ(nvfp4::E4M3ToFloat(0x01), 0.001953125f);  // 2^-9
  EXPECT_EQ(nvfp4::E4M3ToFloat(0x07), 7.0f / 512.0f);
  EXPECT_EQ(nvfp4::E4M3ToFloat(0x84), -4.0f / 512.0f);
  EXPECT_EQ(nvfp4::E4M3ToFloat(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(nvfp4::E4M3ToFloat(0x80)));
  EXPECT_TRUE(std::isnan(nvfp4::E4M3ToFloat(0x7f)));
  EXPECT_TRUE(std::isnan(nvfp4::E4M3ToFloat(0xff)));
  // 0x78..0x7e are finite in the fn variant (no infinities).
  EXPECT_EQ(nvfp4::E4M3ToFloat(0x78), 256.0f);
}

// Encoding: every finite byte round-trips; between two neighbours the
// nearer wins, a tie goes to the even mantissa; beyond 448 saturates.
TEST(Nvfp4FormatTest, E4M3EncodingIsNearestEvenAndSaturates) {
  for (uint32_t byte = 0; byte < 256; ++byte) {
    if ((byte & 0x7f) == 0x7f) continue;  // NaN
    const float value = nvfp4::E4M3ToFloat(byte);
    const uint8_t back = nvfp4::FloatToE4M3(value);
    EXPECT_EQ(nvfp4::E4M3ToFloat(back), value) << byte;
  }
  EXPECT_EQ(nvfp4::FloatToE4M3(1.0625f), 0x38);   // 1 + 1/16: tie, to even 1
  EXPECT_EQ(nvfp4::FloatToE4M3(1.1875f), 0x3a);   // 1 + 3/16: tie, to 1.25
  EXPECT_EQ(nvfp4::FloatToE4M3(1.07f), 0x39);     // above half: 1.125
  EXPECT_EQ(nvfp4::FloatToE4M3(1.96875f), 0x40);  // carries into 2.0
  EXPECT_EQ(nvfp4::FloatToE4M3(-3.0f / 1024), 0x82);  // 1.5 units: tie, even
  EXPECT_EQ(nvfp4::FloatToE4M3(0.0f), 0x00);
  EXPECT_EQ(nvfp4::FloatToE4M3(500.0f), 0x7e);
  EXPECT_EQ(nvfp4::FloatToE4M3(-1e9f), 0xfe);
  EXPECT_EQ(nvfp4::FloatToE4M3(std::nanf("")), 0x7f);
}

TEST(Nvfp4FormatTest,
     GeneratedBlockScalesAreBetweenQuarterAndThreePointSeventyFive) {
  for (uint64_t i = 0; i < 4096; ++i) {
    const float s = nvfp4::E4M3ToFloat(weights::Nvfp4ScaleByte(1, 2, 3, i));
    EXPECT_GE(s, 0.25f);
    EXPECT_LE(s, 3.75f);
  }
}

// A hand-built 2 x 32 tensor: byte 0x21 holds code 1 (0.5) in its low nibble
// (column 0) and code 2 (1.0) in its high nibble (column 1).
TEST(PackedNvfp4Test, LowNibbleIsTheEvenColumnByHand) {
  PackedNvfp4 p;
  p.rows = 2;
  p.k = 32;
  p.codes.assign(32, 0);     // [2][16]
  p.scales.assign(4, 0x38);  // [2][2], all 1.0
  p.tensor_scale = 0.25f;
  p.codes[0] = 0x21;
  p.codes[1] = 0xf8;       // columns 2, 3: code 8 (-0), code 15 (-6)
  p.scales[0] = 0x40;      // row 0, columns 0..15: scale 2.0
  p.codes[16 + 8] = 0x07;  // row 1, columns 16, 17: 6, 0
  p.scales[3] = 0x3c;      // row 1, columns 16..31: scale 1.5
  EXPECT_EQ(PackedWeight(p, 0, 0), 0.5f * 2.0f * 0.25f);
  EXPECT_EQ(PackedWeight(p, 0, 1), 1.0f * 2.0f * 0.25f);
  EXPECT_EQ(PackedWeight(p, 0, 2), 0.0f);
  EXPECT_EQ(PackedWeight(p, 0, 3), -6.0f * 2.0f * 0.25f);
  EXPECT_EQ(PackedWeight(p, 0, 16), 0.0f);
  EXPECT_EQ(PackedWeight(p, 1, 16), 6.0f * 1.5f * 0.25f);
  EXPECT_EQ(PackedWeight(p, 1, 17), 0.0f);
}

TEST(PackedNvfp4Test, DescWeightDecodesTheHashedBytesByLayout) {
  const StepSpec spec = Spec("tiny");
  const Nvfp4TensorDesc d = ExpertGateUpDesc(spec, 1, 5);
  EXPECT_EQ(d.rows, 256);
  EXPECT_EQ(d.k, 256);
  EXPECT_EQ(d.tensor_scale, 1.0f / (6.0f * 16.0f));
  for (int64_t row : {0, 3, 200}) {
    for (int64_t col : {0, 1, 30, 31, 255}) {
      const uint8_t byte = weights::Nvfp4CodeByte(
          42, 1, weights::ExpertGateUp(5), row * 128 + col / 2);
      const uint8_t scale = weights::Nvfp4ScaleByte(
          42, 1, weights::ExpertGateUp(5), row * 16 + col / 16);
      const uint32_t code = col % 2 == 0 ? (byte & 0xf) : (byte >> 4);
      const float expected =
          nvfp4::E2M1ToFloat(code) * nvfp4::E4M3ToFloat(scale) * d.tensor_scale;
      EXPECT_EQ(d.Weight(row, col), expected) << row << "," << col;
    }
  }
}

TEST(PackedNvfp4Test, MaterializedBytesDecodeToTheHashWeights) {
  const StepSpec spec = Spec("tiny");
  const Nvfp4TensorDesc d = ExpertDownDesc(spec, 2, 31);
  const PackedNvfp4 p = Materialize(d);
  EXPECT_EQ(p.rows, 256);
  EXPECT_EQ(p.k, 128);
  EXPECT_EQ(p.codes.size(), 256u * 64u);
  EXPECT_EQ(p.scales.size(), 256u * 8u);
  for (int64_t row = 0; row < p.rows; ++row) {
    for (int64_t col = 0; col < p.k; ++col) {
      ASSERT_EQ(PackedWeight(p, row, col), d.Weight(row, col))
          << row << "," << col;
    }
  }
}

// Pseudo-random rows and columns of a full-size GLM-5 expert, through a
// slice (materializing the whole 4096 x 6144 tensor is not needed).
TEST(PackedNvfp4Test, SliceOfGlm5ExpertDecodesToTheHashWeights) {
  const StepSpec spec = Spec("glm5");
  const Nvfp4TensorDesc d = ExpertGateUpDesc(spec, 3, 200);
  const PackedNvfp4 slice = MaterializeSlice(d, 1000, 64, 2048, 512);
  EXPECT_EQ(slice.tensor_scale, d.tensor_scale);
  for (uint64_t i = 0; i < 2000; ++i) {
    const uint64_t h = weights::Mix64(i);
    const int64_t r = static_cast<int64_t>(h % 64);
    const int64_t c = static_cast<int64_t>((h >> 20) % 512);
    ASSERT_EQ(PackedWeight(slice, r, c), d.Weight(1000 + r, 2048 + c));
  }
  for (uint64_t i = 0; i < 2000; ++i) {
    const uint64_t h = weights::Mix64(i + 12345);
    const int64_t r = static_cast<int64_t>(h % d.rows);
    const int64_t c = static_cast<int64_t>((h >> 24) % d.k);
    const PackedNvfp4 one = MaterializeSlice(d, r, 1, c / 16 * 16, 16);
    ASSERT_EQ(PackedWeight(one, 0, c % 16), d.Weight(r, c));
  }
}

TEST(PackedNvfp4Test, DequantRowAndRangeMatchWeight) {
  const StepSpec spec = Spec("tiny");
  const Nvfp4TensorDesc d = SharedDownDesc(spec, 1);
  std::vector<float> row(static_cast<size_t>(d.k));
  d.DequantRow(7, row.data());
  for (int64_t c = 0; c < d.k; ++c) ASSERT_EQ(row[c], d.Weight(7, c));
  // A range starting on an odd column (the high nibble of a byte).
  std::vector<float> range(21);
  d.DequantRange(9, 33, 21, range.data());
  for (int j = 0; j < 21; ++j) ASSERT_EQ(range[j], d.Weight(9, 33 + j));
}

TEST(Bf16TensorTest, FollowsTheSharedConvention) {
  const StepSpec spec = Spec("tiny");
  const Bf16TensorDesc d = Bf16Desc(spec, 2, weights::kRouter);
  EXPECT_EQ(d.rows, 32);
  EXPECT_EQ(d.k, 256);
  const float scale = 1.0f / std::sqrt(256.0f);
  for (int64_t row : {0, 31}) {
    for (int64_t col : {0, 17, 255}) {
      const float w = d.Weight(row, col);
      EXPECT_EQ(w, weights::Bf16Weight(42, 2, weights::kRouter, row * 256 + col,
                                       scale));
      uint32_t bits;
      std::memcpy(&bits, &w, sizeof(bits));
      EXPECT_EQ(bits & 0xffffu, 0u);  // a BF16 value
      EXPECT_LE(std::fabs(w), scale);
    }
  }
}

TEST(Bf16TensorTest, GemvSumsWeightTimesInput) {
  const Bf16TensorDesc d{9, 0, 77, 3, 16};
  std::vector<float> x(16);
  for (int c = 0; c < 16; ++c) x[c] = static_cast<float>(c + 1);
  std::vector<float> y(3);
  GemvBf16(d, x.data(), y.data());
  for (int r = 0; r < 3; ++r) {
    double expected = 0.0;
    for (int c = 0; c < 16; ++c) expected += double{d.Weight(r, c)} * (c + 1);
    EXPECT_FLOAT_EQ(y[r], static_cast<float>(expected));
  }
}

TEST(Nvfp4GemvTest, SliceGemvMatchesElementwiseSum) {
  const StepSpec spec = Spec("tiny");
  const Nvfp4TensorDesc d = ExpertDownDesc(spec, 1, 0);  // [256, 128]
  std::vector<float> x(64);
  for (int c = 0; c < 64; ++c) x[c] = 0.01f * static_cast<float>(c - 20);
  std::vector<float> y(5);
  GemvNvfp4(d, 10, 5, 64, 64, x.data(), y.data());
  for (int r = 0; r < 5; ++r) {
    double expected = 0.0;
    for (int c = 0; c < 64; ++c)
      expected += double{d.Weight(10 + r, 64 + c)} * x[c];
    EXPECT_FLOAT_EQ(y[r], static_cast<float>(expected));
  }
}

}  // namespace
}  // namespace moetune::ref
