// Hopper's asynchronous pieces shared by the MoE backends (expert_mma*.cuh,
// fused_gemv_fp8.cu, grouped_wgmma.cu), the step's wgmma GEMV
// (kernels/cuda/step/gemv_wgmma.cu) and moetune-read-bench: cp.async copies,
// the wgmma fence / commit / wait, mbarriers, TMA bulk copies global ->
// shared and an L2 evict-first policy.
// wgmma exists on sm_90a only: other targets compile these to a trap (the
// probe reports the wgmma backends unavailable on any device but sm_90).
// Device-only inline PTX; included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace moetune::gpu::mma_detail {

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MOETUNE_NO_WGMMA 1
#endif
__device__ __forceinline__ void WgmmaFence() {
#ifdef MOETUNE_NO_WGMMA
  __trap();
#else
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void WgmmaCommit() {
#ifndef MOETUNE_NO_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Until at most kPending committed wgmma groups of this warp are in flight.
template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
#ifndef MOETUNE_NO_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending)
               : "memory");
#endif
}
__device__ __forceinline__ void WgmmaWaitAll() { WgmmaWait<0>(); }
__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16 bytes global -> shared, asynchronously (cp.async, through L2 only);
// complete for this thread after CpAsyncWait of its commit group.
__device__ __forceinline__ void CpAsync16(void* dst, const void* src) {
  asm volatile(
      "cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(SmemAddr(dst)),
      "l"(src)
      : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Until at most kPending of this thread's committed groups are in flight.
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}
__device__ __forceinline__ void MbarInit(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddr(bar)),
               "r"(count)
               : "memory");
}
// This thread's arrival on `bar`, announcing `bytes` of copies to come.
__device__ __forceinline__ void MbarArriveExpectTx(uint64_t* bar,
                                                   uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}
// This thread's plain arrival on `bar` (release semantics: its earlier
// shared-memory reads and writes are ordered before the phase completes).
__device__ __forceinline__ void MbarArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(SmemAddr(bar))
               : "memory");
}
// Until the phase of parity `phase` of `bar` has completed.
__device__ __forceinline__ void MbarWait(uint64_t* bar, uint32_t phase) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(SmemAddr(bar)),
      "r"(phase)
      : "memory");
}
// One TMA bulk copy global -> shared, completing on `bar`.
__device__ __forceinline__ void BulkCopy(void* dst, const void* src,
                                         uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
      "[%0], [%1], %2, [%3];\n" ::"r"(SmemAddr(dst)),
      "l"(src), "r"(bytes), "r"(SmemAddr(bar))
      : "memory");
}

// The shared::cluster address of `addr` (this block's shared memory) in
// block `rank` of the cluster.
__device__ __forceinline__ uint32_t MapToRank(uint32_t addr, int rank) {
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(out)
               : "r"(addr), "r"(rank));
  return out;
}
// One bulk copy of `bytes` (a multiple of 16) from this block's shared
// memory at `src` into another block's of the cluster at `dst` (a
// shared::cluster address), completing on that block's mbarrier `bar`.
__device__ __forceinline__ void BulkCopyToRank(uint32_t dst, uint32_t src,
                                               uint32_t bytes, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes "
      "[%0], [%1], %2, [%3];\n" ::"r"(dst),
      "r"(src), "r"(bytes), "r"(bar)
      : "memory");
}

// An L2 policy that evicts the streamed weights first: each byte is read
// once, and with the default policy the stream pushes out of L2 what the
// next kernels read again -- their code (the router's serial tail runs on
// instruction fetches) and the routing tables.
__device__ __forceinline__ uint64_t EvictFirstPolicy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n"
               : "=l"(policy));
  return policy;
}
// As BulkCopy, under an L2 cache policy.
__device__ __forceinline__ void BulkCopyWithPolicy(void* dst, const void* src,
                                                   uint32_t bytes,
                                                   uint64_t* bar,
                                                   uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(SmemAddr(dst)),
      "l"(src), "r"(bytes), "r"(SmemAddr(bar)), "l"(policy)
      : "memory");
}

// One TMA tensor copy global -> shared of the box at coordinates (c0, c1,
// c2) of the 3-D tensor map `map` (a __grid_constant__ kernel parameter),
// completing on `bar`; the destination 128-byte aligned (1024 where the map
// swizzles by 128 bytes).
__device__ __forceinline__ void TensorCopy3d(void* dst, const void* map, int c0,
                                             int c1, int c2, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
          SmemAddr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(SmemAddr(bar))
      : "memory");
}
// As TensorCopy3d, under an L2 cache policy.
__device__ __forceinline__ void TensorCopy3d(void* dst, const void* map, int c0,
                                             int c1, int c2, uint64_t* bar,
                                             uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3, %4}], [%5], "
      "%6;\n" ::"r"(SmemAddr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(SmemAddr(bar)), "l"(policy)
      : "memory");
}

// The wgmma descriptor of a K-major operand in shared memory at `addr`, no
// swizzle: core matrices (8 rows x 16 bytes) kLeading bytes apart along K
// (leading byte offset) and kStride bytes apart along M or N (stride).
template <int kLeading, int kStride>
__device__ __forceinline__ uint64_t NoSwizzleDescriptor(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3ffff) >> 4) |
         (static_cast<uint64_t>(kLeading >> 4) << 16) |
         (static_cast<uint64_t>(kStride >> 4) << 32);
}

// The wgmma descriptor of a K-major operand in shared memory at `addr` in
// the 128-byte swizzle (a TMA box of 64 BF16 K a row): rows 128 bytes apart,
// 8-row groups 1024 bytes apart; the atom's start 1024-aligned, a k16 step
// 32 bytes on from it.
__device__ __forceinline__ uint64_t Swizzle128Descriptor(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3ffff) >> 4) |
         (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) |
         (static_cast<uint64_t>(1) << 62);
}

}  // namespace moetune::gpu::mma_detail
