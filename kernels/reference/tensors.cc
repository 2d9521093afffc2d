#include "kernels/reference/tensors.h"

#include <cmath>

#include "kernels/model/nvfp4_format.h"
#include "kernels/model/weight_gen.h"

namespace moetune::ref {
namespace {

// nvfp4::E2M1ToFloat by table, for DequantRange: random codes make its
// branches unpredictable, which makes row dequantization 10x slower.
struct E2M1Table {
  float values[16];
  E2M1Table() {
    for (uint32_t code = 0; code < 16; ++code) {
      values[code] = nvfp4::E2M1ToFloat(code);
    }
  }
};

uint32_t Nibble(uint8_t code_byte, int64_t col) {
  return (col % 2 == 0) ? (code_byte & 0xfu) : (code_byte >> 4);
}

// The one place a weight is built from its bytes: (E2M1 * E4M3) * scale.
float DecodeWeight(uint8_t code_byte, int64_t col, uint8_t scale_byte,
                   float tensor_scale) {
  const float block_value = nvfp4::E2M1ToFloat(Nibble(code_byte, col)) *
                            nvfp4::E4M3ToFloat(scale_byte);
  return block_value * tensor_scale;
}

uint8_t CodeByte(const Nvfp4TensorDesc& d, int64_t row, int64_t col) {
  return weights::Nvfp4CodeByte(
      d.seed, d.layer, d.tensor,
      static_cast<uint64_t>(row * (d.k / 2) + col / 2));
}

uint8_t ScaleByte(const Nvfp4TensorDesc& d, int64_t row, int64_t col) {
  return weights::Nvfp4ScaleByte(
      d.seed, d.layer, d.tensor,
      static_cast<uint64_t>(row * (d.k / nvfp4::kBlockSize) +
                            col / nvfp4::kBlockSize));
}

}  // namespace

float Bf16TensorDesc::Weight(int64_t row, int64_t col) const {
  return weights::Bf16Weight(seed, layer, tensor,
                             static_cast<uint64_t>(row * k + col),
                             1.0f / std::sqrt(static_cast<float>(k)));
}

void GemvBf16(const Bf16TensorDesc& w, const float* x, float* out) {
  GemvBf16(w, 0, w.rows, 0, w.k, x, out);
}

void GemvBf16(const Bf16TensorDesc& w, int64_t row_begin, int64_t rows,
              int64_t col_begin, int64_t cols, const float* x, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      sum += static_cast<double>(w.Weight(row_begin + r, col_begin + c)) * x[c];
    }
    out[r] = static_cast<float>(sum);
  }
}

float Nvfp4TensorDesc::Weight(int64_t row, int64_t col) const {
  return DecodeWeight(CodeByte(*this, row, col), col,
                      ScaleByte(*this, row, col), tensor_scale);
}

void Nvfp4TensorDesc::DequantRow(int64_t row, float* out) const {
  DequantRange(row, 0, k, out);
}

// Same values as Weight(), hashing each code byte and block scale once and
// decoding each block scale once. Members are copied to locals so the
// compiler can hoist the hash's per-tensor stream out of the loop (a store
// to `out` could otherwise alias tensor_scale).
void Nvfp4TensorDesc::DequantRange(int64_t row, int64_t col_begin, int64_t cols,
                                   float* out) const {
  const Nvfp4TensorDesc d = *this;
  const float scale = tensor_scale;
  static const E2M1Table table;
  uint8_t code_byte = 0;
  float block_scale = 0.0f;
  for (int64_t j = 0; j < cols; ++j) {
    const int64_t col = col_begin + j;
    if (j == 0 || col % 2 == 0) code_byte = CodeByte(d, row, col);
    if (j == 0 || col % nvfp4::kBlockSize == 0) {
      block_scale = nvfp4::E4M3ToFloat(ScaleByte(d, row, col));
    }
    out[j] = (table.values[Nibble(code_byte, col)] * block_scale) * scale;
  }
}

void GemvNvfp4(const Nvfp4TensorDesc& w, int64_t row_begin, int64_t rows,
               int64_t col_begin, int64_t cols, const float* x, float* out) {
  std::vector<float> row_values(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    w.DequantRange(row_begin + r, col_begin, cols, row_values.data());
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      sum += static_cast<double>(row_values[c]) * x[c];
    }
    out[r] = static_cast<float>(sum);
  }
}

float WeightDesc::Weight(int64_t row, int64_t col) const {
  return nvfp4 ? fp4.Weight(row, col) : bf16.Weight(row, col);
}

void Gemv(const WeightDesc& w, int64_t row_begin, int64_t rows,
          int64_t col_begin, int64_t cols, const float* x, float* out) {
  if (w.nvfp4) {
    GemvNvfp4(w.fp4, row_begin, rows, col_begin, cols, x, out);
  } else {
    GemvBf16(w.bf16, row_begin, rows, col_begin, cols, x, out);
  }
}

void Gemv(const WeightDesc& w, const float* x, float* out) {
  Gemv(w, 0, w.rows(), 0, w.k(), x, out);
}

PackedNvfp4 Materialize(const Nvfp4TensorDesc& desc) {
  return MaterializeSlice(desc, 0, desc.rows, 0, desc.k);
}

PackedNvfp4 MaterializeSlice(const Nvfp4TensorDesc& desc_ref, int64_t row_begin,
                             int64_t rows, int64_t col_begin, int64_t k) {
  const Nvfp4TensorDesc desc = desc_ref;  // a local: see DequantRange
  PackedNvfp4 packed;
  packed.rows = rows;
  packed.k = k;
  packed.tensor_scale = desc.tensor_scale;
  packed.codes.resize(static_cast<size_t>(nvfp4::CodeBytes(rows, k)));
  packed.scales.resize(static_cast<size_t>(nvfp4::ScaleBytes(rows, k)));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < k; c += 2) {
      packed.codes[r * (k / 2) + c / 2] =
          CodeByte(desc, row_begin + r, col_begin + c);
    }
    for (int64_t c = 0; c < k; c += nvfp4::kBlockSize) {
      packed.scales[r * (k / nvfp4::kBlockSize) + c / nvfp4::kBlockSize] =
          ScaleByte(desc, row_begin + r, col_begin + c);
    }
  }
  return packed;
}

float PackedWeight(const PackedNvfp4& packed, int64_t row, int64_t col) {
  const uint8_t code_byte = packed.codes[row * (packed.k / 2) + col / 2];
  const uint8_t scale_byte =
      packed.scales[row * (packed.k / nvfp4::kBlockSize) +
                    col / nvfp4::kBlockSize];
  return DecodeWeight(code_byte, col, scale_byte, packed.tensor_scale);
}

}  // namespace moetune::ref
