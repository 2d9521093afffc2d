// The one-shot all-reduce's per-element sum (kernels/cuda/comm/oneshot.cu):
// which ranks' values are combined, in which order, in which arithmetic.
// That order fixes the result's bits, and the GPU tests check exact sums and
// bit-identical results on every rank; keeping it here, in plain C++ with
// MOETUNE_HD, lets the kernel and a CPU test use the same function, so the
// order is checked on machines without a GPU. Pure; thread-safe.
//
// The order: rank 0's value first, then rank 1's, ... rank W-1's, added one
// at a time into an fp32 accumulator that starts at +0.0f. Float addition is
// not associative (with 2^24 and 1.0f, (1 + 2^24) - 2^24 = 0 but
// (2^24 - 2^24) + 1 = 1), so every rank must use this one order: the calling
// rank takes no part in it, which is why every rank gets the same bits.
// Starting at +0.0f also fixes the sign of a zero sum: -0.0f from every rank
// sums to +0.0f.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace moetune::gpu {

// The largest world the one-shot all-reduce serves (its kernel's arguments
// hold one buffer pointer a rank).
inline constexpr int kOneShotMaxRanks = 8;

// Sum over ranks r = 0, 1, ..., world - 1, in that order, of
// buffers[r][offset], in fp32. `buffers` holds one pointer per rank (the
// calling rank's view of every rank's buffer); world <= kOneShotMaxRanks.
MOETUNE_HD float OneShotRankOrderSum(const float* const* buffers, int world,
                                     int64_t offset) {
  float sum = 0.0f;
  for (int r = 0; r < world; ++r) sum += buffers[r][offset];
  return sum;
}

}  // namespace moetune::gpu
