// When a router's top-k selection is a correct one: two correct routers that
// sum a token's logits in different orders (the backends' shared router on
// BF16 inputs and tensor cores, the trusted path one thread a product) may
// break a near-tie between two experts differently, and the MoE outputs then
// differ by a whole expert's contribution (one such flip makes a step check
// read 9e-2 on its layer against 2e-4 on the others). The trusted path
// accepts the backend's selection when it is a top-k of its own scores to
// within a tolerance far below the scores' typical gaps and far above a
// float sum's reordering error, and keeps its own otherwise.
// Shared by the trusted GPU path and its host test. Pure; thread-safe.
#pragma once

#include "common/host_device.h"

namespace moetune::route {

// Scores (sigmoid + bias) may differ by this much between correct routers:
// a float sum of 6144 BF16 products reordered moves a logit by ~1e-6 of its
// magnitude; neighbouring scores of 256 experts are ~4e-3 apart on average.
inline constexpr float kTieTolerance = 1e-5f;

// Whether `candidate` [k] (expert indices) is a top-k of `score` [n] to
// within `tolerance`: k distinct indices in [0, n), none scoring below
// `kth` (the k-th best score) by more than `tolerance`.
MOETUNE_HD bool IsNearTopK(const float* score, int n, const int* candidate,
                           int k, float kth, float tolerance) {
  for (int r = 0; r < k; ++r) {
    const int e = candidate[r];
    if (e < 0 || e >= n || score[e] < kth - tolerance) return false;
    for (int q = 0; q < r; ++q) {
      if (candidate[q] == e) return false;
    }
  }
  return true;
}

}  // namespace moetune::route
