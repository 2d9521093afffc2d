// kernels/model/near_top_k.h: when the trusted path takes a backend's top-k
// selection (a near-tie broken the other way) and when it keeps its own.
#include "kernels/model/near_top_k.h"

#include <vector>

#include "gtest/gtest.h"

namespace moetune::route {
namespace {

// Scores of 8 experts; the top 3 are 0.9 (e 1), 0.8 (e 4), 0.7 (e 6), and
// expert 2 sits just below the third (a near-tie), expert 0 far below.
const std::vector<float> kScores = {0.1f, 0.9f, 0.7f - 4e-6f, 0.2f,
                                    0.8f, 0.3f, 0.7f,         0.05f};
constexpr float kKth = 0.7f;

bool Near(const std::vector<int>& candidate) {
  return IsNearTopK(kScores.data(), static_cast<int>(kScores.size()),
                    candidate.data(), static_cast<int>(candidate.size()), kKth,
                    kTieTolerance);
}

TEST(NearTopKTest, TheExactTopKInAnyOrderIsTaken) {
  EXPECT_TRUE(Near({1, 4, 6}));
  EXPECT_TRUE(Near({6, 1, 4}));
}

TEST(NearTopKTest, ANearTieBrokenTheOtherWayIsTaken) {
  EXPECT_TRUE(Near({1, 4, 2}));
}

TEST(NearTopKTest, AnExpertFarBelowTheKthIsRefused) {
  EXPECT_FALSE(Near({1, 4, 5}));
  EXPECT_FALSE(Near({1, 4, 0}));
  // Just past the tolerance.
  std::vector<float> scores = kScores;
  scores[2] = kKth - 2 * kTieTolerance;
  const int candidate[] = {1, 4, 2};
  EXPECT_FALSE(IsNearTopK(scores.data(), 8, candidate, 3, kKth, kTieTolerance));
}

TEST(NearTopKTest, RepeatsAndIndicesOutOfRangeAreRefused) {
  EXPECT_FALSE(Near({1, 4, 4}));
  EXPECT_FALSE(Near({1, 4, -1}));
  EXPECT_FALSE(Near({1, 4, 8}));
}

}  // namespace
}  // namespace moetune::route
