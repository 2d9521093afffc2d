// Test helper: a near-tie at a sequence's k-th kept token in one layer of a
// reference trace, and kept sets with the tie broken the other way, as a
// correct indexer carrying BF16 inputs may break it (ProposedKept). Shared
// by the reference's and the worker's tests. Test-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/reference/decode_step.h"

namespace moetune::ref::testing {

struct KeptTie {
  int sequence = -1;  // -1: none found
  int tie = -1;       // an unkept token within `tolerance` of the k-th
  int far = -1;       // an unkept token 10x further below
};

// The first sequence of layer trace `t` with both an unkept token tied with
// its k-th kept one and one far below (tolerance as
// AttentionTrace::kept_tolerance: a share of the largest score magnitude).
inline KeptTie FindKeptTie(const LayerTrace& t, float tolerance) {
  for (int b = 0; b < static_cast<int>(t.kept.size()); ++b) {
    const std::vector<float>& s = t.index_scores[b];
    float kth = s[t.kept[b][0]], largest = 0.0f;
    for (const int i : t.kept[b]) kth = std::min(kth, s[i]);
    for (const float v : s) largest = std::max(largest, std::fabs(v));
    KeptTie found{b, -1, -1};
    for (int i = 0; i < static_cast<int>(s.size()); ++i) {
      if (std::count(t.kept[b].begin(), t.kept[b].end(), i) > 0) continue;
      if (s[i] >= kth - tolerance * largest && found.tie < 0) found.tie = i;
      if (s[i] < kth - 10 * tolerance * largest && found.far < 0) {
        found.far = i;
      }
    }
    if (found.tie >= 0 && found.far >= 0) return found;
  }
  return {};
}

// Sequence `sequence`'s kept set of trace `t` with its lowest-scoring kept
// token swapped for `token`.
inline std::vector<int> SwappedKept(const LayerTrace& t, int sequence,
                                    int token) {
  const std::vector<float>& scores = t.index_scores[sequence];
  std::vector<int> swapped = t.kept[sequence];
  auto lowest = std::min_element(
      swapped.begin(), swapped.end(),
      [&scores](int a, int b) { return scores[a] < scores[b]; });
  *lowest = token;
  return swapped;
}

}  // namespace moetune::ref::testing
