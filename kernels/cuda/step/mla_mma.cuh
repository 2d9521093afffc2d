// The split kernel of sparse MLA (mla.cuh SparseAttention) on tensor cores,
// for the BF16 latent cache: at 32 sequences the CUDA-core kernel spends
// ~200 us a layer reading its float rows from shared memory for every
// (head, token) product (kernels/cuda/step/PERF.md). Here a block stages
// its 32 kept entries as they are (BF16) and eight warps compute the scores
// (query x entries) and the weighted values (probabilities x entries) with
// mma.sync, both transposed so that the block's 8 heads fill mma's N and
// tokens or latent dims its M of 16; the float sides (queries,
// probabilities) in three BF16 parts, so the products keep float accuracy. The
// new token's entry is this step's float, not a BF16 one: its score and value
// are summed in float. From kPrebuiltQueriesFromBatch a block takes 2, 4 or 8
// such tiles in turn (an online softmax across them; the next tile's entries
// copied by cp.async into a second buffer while one is summed), so fewer,
// longer blocks fill one wave. Writes the same partials as the CUDA-core kernel
// (one a block), for the same combine. Launch-only; not thread-safe.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/base/launch_policy.h"
#include "kernels/cuda/step/mla.cuh"

namespace moetune::gpu {

// The batch from which the queries' fragments are made once before the
// split blocks (MlaQueryKernel) rather than by each block, and the blocks
// take several tiles of kept tokens (SparseAttentionMmaTiles). One tile a
// block, made before against made by each block: batch 1 9.01 against
// 8.78 ms, 8 17.33 against 17.11, 32 39.14 against 42.10. With the
// several-tile blocks chosen at run time (TP8, context 4096, graph on):
// batch 8 made by each block 15.00 ms, made before with blocks of 1, 2 and
// 4 tiles 15.11, 14.46, 15.37; batch 16 with 1, 2, 4 tiles 21.05, 20.86,
// 20.42; batch 32 32.63, 32.38, 31.54. Counted in sequences of
// kAttentionHeads heads (a TP8 rank's 8): a rank with all 64 heads
// (data-parallel attention) makes them from one sequence (not measured).
// Made off the chain (SparseAttention::queries_beside), from one sequence.
inline constexpr int kPrebuiltQueriesFromBatch = 8;

// Whether the tensor-core split kernel takes a: the BF16 cache, kv_lora +
// rope a multiple of 16, kv_lora of 32, at most kAttentionHeads heads a
// block.
bool SparseAttentionMmaFits(const SparseAttention& a);

// Tiles of kAttentionTokens kept tokens a block of the split kernel (with
// hg heads, on a device of sm_count SMs): more than one, with an online
// softmax across them, only where the queries are made before the blocks;
// the most (8, 4, 2) whose blocks still fill 15/16 of one wave (8 at 32
// sequences of 8 heads on an H200; kernels/cuda/step/PERF.md).
int SparseAttentionMmaTiles(const SparseAttention& a, int hg, int sm_count);

// The split kernel for hg heads and `tiles` tiles a block over grid
// (ceil(splits / tiles) x head groups, batch), as mla.cu's; the
// fragments made first where the kernel takes them and the caller did not
// make them beside (a.queries_beside).
GpuStatus LaunchSparseAttentionSplitMma(const SparseAttention& a, int hg,
                                        int tiles, dim3 grid,
                                        cudaStream_t stream,
                                        const LaunchPolicy& policy);

// The queries' fragments made before the split blocks, where the kernel
// for hg heads a block takes them that way (else nothing is launched).
GpuStatus LaunchMlaQueries(const SparseAttention& a, int hg,
                           cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace moetune::gpu
