// Test support: runs step kernels on host data -- the BF16 GEMV
// (kernels/cuda/step/gemv.cuh), the indexer's scores and sparse MLA over
// the BF16 cache (mla.cuh) -- for the *_gpu_test.cc files next to it, which
// are plain C++ (the kernels' headers hold device code).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moetune::gpu::testing {

// A Bf16Gemv's shape (kernels/cuda/step/gemv.cuh names each field); the
// rows split into `segments` outputs ({} = one output of every row).
struct GemvShape {
  int rows = 0, k = 0, batch = 1;
  int rows_per_x = 0;
  int64_t w_group_stride = 0, w_group_offset = 0;
  int64_t x_stride = 0, x_group_stride = 0;
  std::vector<int> segments;
  // Launch the wgmma GEMV directly (gemv_wgmma.cuh), at any batch it takes,
  // rather than through LaunchGemvBf16's choice.
  bool force_wgmma = false;
  // The kernels that can issue their weights before their wait do
  // (LaunchPolicy::weights_ahead).
  bool weights_ahead = false;
  // NVFP4: give the kernel the scratch for its inputs split once
  // (Nvfp4Gemv::x_parts), which it uses from kNvfp4SplitOnceFromBatch.
  bool x_parts = false;
};

// Copies w and x to the device, launches LaunchGemvBf16, and returns each
// segment's output ([batch][segment rows]); "" or the failure.
std::string RunGemvBf16(const GemvShape& shape, const std::vector<uint16_t>& w,
                        const std::vector<float>& x,
                        std::vector<std::vector<float>>* y);

// The NVFP4 GEMV (gemv.cuh Nvfp4Gemv, no segments): codes [w_rows][k / 2],
// scales [w_rows][k / 16] E4M3 bytes, times tensor_scale.
std::string RunGemvNvfp4(const GemvShape& shape,
                         const std::vector<uint8_t>& codes,
                         const std::vector<uint8_t>& scales, float tensor_scale,
                         const std::vector<float>& x, std::vector<float>* y);
bool TensorCoresTakeNvfp4(const GemvShape& shape);
int Nvfp4SplitOnceFromBatch();

// W_UK's absorption of the queries (gemv.cuh AbsorbQuery, BF16 weights):
// kv_b [heads * (nope + v_dim)][kv_lora], q [batch][heads][q_head] floats
// (each head's nope dims first); *q_lat [batch][heads][kv_lora]; "" or
// the failure.
struct AbsorbShape {
  int heads = 0, nope = 0, v_dim = 0, kv_lora = 0, batch = 1, q_head = 0;
};
std::string RunAbsorbQuery(const AbsorbShape& shape,
                           const std::vector<uint16_t>& kv_b,
                           const std::vector<float>& q,
                           std::vector<float>* q_lat);

// Whether the tensor-core GEMV takes the shape (16-byte aligned inputs
// assumed), and the batch from which LaunchGemvBf16 uses it.
bool TensorCoresTake(const GemvShape& shape);
int TensorCoreMinBatch();
// Whether the wgmma GEMV takes the shape on this device (16-byte aligned
// inputs assumed), and the batch from which LaunchGemvBf16 uses it.
bool WgmmaTakes(const GemvShape& shape);
int WgmmaMinBatch();
// The consumer warpgroups a block of the wgmma GEMV's launch for the shape
// on this device (1-3; 0: not planned).
int WgmmaWarpgroups(const GemvShape& shape);
// The indexer's top-k (mla.cuh LaunchTopK) of `batch` rows of n scores
// each, k kept: each row's kept indices, ascending; "" or the failure.
std::string RunTopK(const std::vector<float>& scores, int n, int k, int batch,
                    std::vector<std::vector<int>>* kept);

// The indexer's scores (mla.cuh IndexerScores: q [batch][heads][dim], w
// [batch][heads], keys [batch][key_stride][dim] E4M3 bytes, new_key
// [batch][dim]) into *scores [batch][context + 1]; "" or the failure.
struct ScoresShape {
  int heads = 0, dim = 0, context = 0, batch = 1, key_stride = 0;
  float w_scale = 1, dot_scale = 1;
};
std::string RunIndexerScores(const ScoresShape& shape,
                             const std::vector<float>& q,
                             const std::vector<float>& w,
                             const std::vector<uint8_t>& keys,
                             const std::vector<float>& new_key,
                             std::vector<float>* scores);

// Whether the tensor-core scores kernel takes the shape (aligned buffers).
bool TensorCoreScoresTake(const ScoresShape& shape);

// Sparse MLA (mla.cuh SparseAttention, BF16 cache) on host data:
// q_lat [batch][heads][kv_lora], q_rope [batch][heads][rope], latent
// [batch][cache_stride][kv_lora + rope] BF16 bits, new_entry
// [batch][kv_lora + rope], kept [batch][k] with kept_n [batch]; into
// *out_lat [batch][heads][kv_lora]; "" or the failure.
struct AttentionShape {
  int heads = 0, kv_lora = 0, rope = 0, context = 0, batch = 1, k = 0;
  int cache_stride = 0;
  float scale = 1;
  // Give the kernel the scratch for queries made once before the splits
  // (SparseAttention::query_frags); without, each split block makes them.
  bool query_scratch = true;
  // The SMs the launch is told of (0: the device's); fewer make the split
  // blocks take several tiles of kept tokens.
  int sm_count = 0;
};
struct AttentionData {
  std::vector<float> q_lat, q_rope, new_entry;
  std::vector<uint16_t> latent;
  std::vector<int> kept, kept_n;
};
std::string RunSparseAttention(const AttentionShape& shape,
                               const AttentionData& data,
                               std::vector<float>* out_lat);

// Whether the tensor-core split kernel takes the shape, and the batch from
// which it uses query_scratch.
bool TensorCoreAttentionTakes(const AttentionShape& shape);
// Tiles of kept tokens a split block takes for the shape (its sm_count).
int AttentionBlockTiles(const AttentionShape& shape);
int QueriesMadeBeforeFromBatch();

// carveout.h FittedCarveout of a 256-thread kernel with
// kCarveoutKernelSharedBytes of static shared memory, for a grid of
// `blocks`; and the device's SMs, largest shared memory an SM, and shared
// memory reserved a block.
inline constexpr int kCarveoutKernelSharedBytes = 20 * 1024;
struct CarveoutDevice {
  int sms = 0, most = 0, reserved = 0;
};
int CarveoutOfASharedMemoryKernel(int64_t blocks, CarveoutDevice* device);

}  // namespace moetune::gpu::testing
