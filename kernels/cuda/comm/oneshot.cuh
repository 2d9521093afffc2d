// The one-shot all-reduce (and reduce-scatter and all-gather, for
// data-parallel attention): one kernel in which every rank copies its input
// into its own peer-visible buffer, tells every peer so, waits for every
// peer's word, and sums the ranks' buffers in rank order 0..W-1 (the same
// order on every rank, so every rank gets bit-identical sums: the sum is
// oneshot_order.h's, which a CPU test checks). For the small messages of a
// decode step (a few KB a layer) it replaces NCCL's protocol steps with one
// kernel of two NVLink round trips.
//
// Synchronisation, per thread block b (the grid is fixed, kOneShotBlocks,
// so block b of every rank handles the same slice of every call):
//  - block b counts its calls in `epochs[b]` (device memory of its rank),
//    so the count survives CUDA graph replays; call k uses buffer k % 2;
//  - after writing its slice, block b stores k (release, system scope) into
//    flags[rank][b] of every peer, then waits (acquire) until each peer's
//    flags[peer][b] of its own memory has reached k;
//  - two buffers suffice: a peer can start writing buffer k % 2 again
//    (call k + 2) only after this rank's flag of call k + 1, which is
//    written after this rank's call k has finished (stream order).
// A wait longer than kOneShotTimeoutNs sets *error and gives up (the sums
// are then wrong and the host reports it): a dead peer never hangs the
// process.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/comm/oneshot_order.h"  // kOneShotMaxRanks, the sum

namespace moetune::gpu {

inline constexpr int kOneShotBlocks = 32;
inline constexpr int kOneShotThreads = 512;
inline constexpr uint64_t kOneShotTimeoutNs = 10'000'000'000ull;

struct OneShotArgs {
  // Rank r's buffer: 2 * max_floats floats (the two call parities).
  float* buffers[kOneShotMaxRanks] = {};
  // Rank r's flags: [kOneShotMaxRanks][kOneShotBlocks] words, where peer p
  // writes flags[p][b].
  uint32_t* flags[kOneShotMaxRanks] = {};
  uint32_t* epochs = nullptr;  // this rank's [kOneShotBlocks] call counts
  uint32_t* error = nullptr;   // this rank's: set when a wait timed out
  int rank = 0, world = 1;
  int64_t max_floats = 0;
};

// One call of the kernel, n 4-byte words a rank:
//  - kAllReduce: out[i] = sum over ranks r (in order) of rank r's in[i] (n
//    floats <= max_floats; in and out may be the same buffer).
// Data-parallel attention's MoE dispatch and combine (world * n <=
// max_floats):
//  - kReduceScatter: in [world][n] floats; out[i] = the rank-order sum of
//    every rank's in[rank * n + i] (out apart from in);
//  - kAllGather: rank r's words in[r * n .. (r + 1) * n) go to every rank's
//    out at the same place (in and out the same buffer, or not), copied bit
//    for bit (any data: BF16 pairs too).
enum class OneShotOp { kAllReduce, kReduceScatter, kAllGather };
cudaError_t LaunchOneShot(const OneShotArgs& args, OneShotOp op, const void* in,
                          void* out, int64_t n, cudaStream_t stream);
// Loads the kernel now. With CUDA's lazy loading a kernel is loaded at its
// first launch, and a load can wait for the context's running kernels:
// ranks sharing a device whose first launch came while a peer's kernel
// spun waiting for them would each wait on the other (a one-shot test
// can time out so whenever an unrelated kernel is added to the binary).
cudaError_t LoadOneShotKernel();

// Bytes of one rank's peer-visible allocation for max_floats, and where its
// flags start in it.
int64_t OneShotPeerBytes(int64_t max_floats);
int64_t OneShotFlagsOffset(int64_t max_floats);

}  // namespace moetune::gpu
