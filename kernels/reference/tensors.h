// Weight tensors of the reference, as descriptors over the counter-based
// hash of kernels/model/weight_gen.h (no tensor is ever stored whole), and the
// packed NVFP4 bytes that kernels read (docs/design.md §2).
//
// BF16 tensor [rows, k]: element (row, col) = Bf16Weight(seed, layer, tensor,
//   row * k + col, 1 / sqrt(k)): uniform(-1, 1) / sqrt(k), so an output has
//   1/3 of its input's mean square (the fixed convention the GPU kernels
//   share).
// NVFP4 tensor [rows, k]: codes row-major [rows][k/2], byte index
//   row*(k/2) + col/2, low nibble = even col; E4M3 block scales row-major
//   [rows][k/16]; tensor scale Nvfp4TensorScale(k). A weight is
//   (E2M1(code) * E4M3(scale)) * tensor_scale, in that order: the first
//   product is exact, the second is the only rounding.
// Descriptors and packed tensors are values; const methods are thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace moetune::ref {

struct Bf16TensorDesc {
  uint64_t seed = 0;
  uint32_t layer = 0;
  uint32_t tensor = 0;
  int64_t rows = 0;
  int64_t k = 0;
  float Weight(int64_t row, int64_t col) const;
};

// out[r] = sum_c W[r][c] * x[c] for r in [0, rows), double accumulation.
void GemvBf16(const Bf16TensorDesc& w, const float* x, float* out);
// out[r] = sum_c W[row_begin + r][col_begin + c] * x[c] for r < rows,
// c < cols: a shard's rows or columns.
void GemvBf16(const Bf16TensorDesc& w, int64_t row_begin, int64_t rows,
              int64_t col_begin, int64_t cols, const float* x, float* out);

struct Nvfp4TensorDesc {
  uint64_t seed = 0;
  uint32_t layer = 0;
  uint32_t tensor = 0;
  int64_t rows = 0;
  int64_t k = 0;  // multiple of 16
  float tensor_scale = 0.0f;
  // Straight from the hash, one element at a time: the oracle.
  float Weight(int64_t row, int64_t col) const;
  // out[c] = Weight(row, c) for c in [0, k).
  void DequantRow(int64_t row, float* out) const;
  // out[j] = Weight(row, col_begin + j) for j in [0, cols).
  void DequantRange(int64_t row, int64_t col_begin, int64_t cols,
                    float* out) const;
};

// out[r] = sum_c W[row_begin + r][col_begin + c] * x[c] for r < rows,
// c < cols, double accumulation: a TP slice of an NVFP4 GEMV.
void GemvNvfp4(const Nvfp4TensorDesc& w, int64_t row_begin, int64_t rows,
               int64_t col_begin, int64_t cols, const float* x, float* out);

// A projection's weights in the format its group has in the workload
// (step_spec.h Quantization): the same (seed, layer, tensor) read as a BF16
// or as an NVFP4 tensor of the same shape.
struct WeightDesc {
  bool nvfp4 = false;
  Bf16TensorDesc bf16;  // when !nvfp4
  Nvfp4TensorDesc fp4;  // when nvfp4
  int64_t rows() const { return nvfp4 ? fp4.rows : bf16.rows; }
  int64_t k() const { return nvfp4 ? fp4.k : bf16.k; }
  float Weight(int64_t row, int64_t col) const;
};

// GemvBf16 or GemvNvfp4 by format (for NVFP4, col_begin and cols must cut
// whole blocks for the slice to be a kernel's).
void Gemv(const WeightDesc& w, int64_t row_begin, int64_t rows,
          int64_t col_begin, int64_t cols, const float* x, float* out);
// The whole matrix: out[r] for r < rows().
void Gemv(const WeightDesc& w, const float* x, float* out);

// The real byte layout of an NVFP4 tensor (or of a sub-block of one).
struct PackedNvfp4 {
  int64_t rows = 0;
  int64_t k = 0;
  std::vector<uint8_t> codes;   // [rows][k/2]
  std::vector<uint8_t> scales;  // [rows][k/16]
  float tensor_scale = 0.0f;
};

PackedNvfp4 Materialize(const Nvfp4TensorDesc& desc);

// Rows [row_begin, row_begin + rows) x columns [col_begin, col_begin + k) of
// the tensor, packed as a [rows, k] tensor with the full tensor's scale.
// col_begin and k must be multiples of 16 so whole blocks are cut.
PackedNvfp4 MaterializeSlice(const Nvfp4TensorDesc& desc, int64_t row_begin,
                             int64_t rows, int64_t col_begin, int64_t k);

// Decodes element (row, col) from the packed bytes.
float PackedWeight(const PackedNvfp4& packed, int64_t row, int64_t col);

}  // namespace moetune::ref
