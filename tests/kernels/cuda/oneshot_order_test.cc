// The one-shot all-reduce's summation order (kernels/cuda/comm/oneshot_order.h)
// on the CPU: the kernel's own function, compiled for the host. It adds the
// ranks' values in rank order 0..W-1 in fp32 (no other order gives its bits,
// on values chosen so that orders round differently), every rank gets the
// same bits whatever its view of the buffers, and it matches an explicit
// reference loop for worlds 1..8 at the kernel's sizes and both parities.
#include "kernels/cuda/comm/oneshot_order.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace moetune::gpu {
namespace {

uint32_t Bits(float value) { return std::bit_cast<uint32_t>(value); }

// values[r][i]: rank r's buffer. Signed values of magnitudes 2^-20..2^20,
// so that adding them in different orders rounds differently.
std::vector<std::vector<float>> SpreadValues(int world, int64_t n,
                                             uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::bernoulli_distribution negative(0.5);
  std::vector<std::vector<float>> values(world, std::vector<float>(n));
  for (std::vector<float>& rank : values) {
    for (float& v : rank) {
      v = std::ldexp(mantissa(rng), exponent(rng)) * (negative(rng) ? -1 : 1);
    }
  }
  return values;
}

std::vector<const float*> Pointers(
    const std::vector<std::vector<float>>& values) {
  std::vector<const float*> pointers;
  for (const std::vector<float>& rank : values) pointers.push_back(rank.data());
  return pointers;
}

// The sum of element i over the ranks in `order`, one fp32 add at a time.
float SumInOrder(const std::vector<std::vector<float>>& values,
                 const std::vector<int>& order, int64_t i) {
  float sum = 0.0f;
  for (int r : order) sum = sum + values[r][i];
  return sum;
}

TEST(OneShotOrderTest, AddsRankZeroFirstAndTheLastRankLast) {
  // 1 + 2^24 rounds back to 2^24 (ties to even), so rank order gives 0;
  // the reverse order cancels first and gives 1.
  const float big = 16777216.0f;
  const std::vector<std::vector<float>> values = {{1.0f}, {big}, {-big}};
  const std::vector<const float*> buffers = Pointers(values);
  EXPECT_EQ(Bits(OneShotRankOrderSum(buffers.data(), 3, 0)), Bits(0.0f));
  EXPECT_EQ(SumInOrder(values, {2, 1, 0}, 0), 1.0f);
}

// Orders that differ only in which of the first two ranks comes first give
// the same bits (0 + a + b == 0 + b + a: addition commutes); every other
// order differs from rank order on at least one element of this data.
bool SameBitsAsRankOrder(const std::vector<int>& order) {
  for (size_t k = 2; k < order.size(); ++k) {
    if (order[k] != static_cast<int>(k)) return false;
  }
  return order.size() < 2 || std::min(order[0], order[1]) == 0;
}

TEST(OneShotOrderTest, OnlyRankOrderGivesItsBitsUpToTheFirstPair) {
  constexpr int64_t kFloats = 512;
  for (int world = 1; world <= kOneShotMaxRanks; ++world) {
    const auto values = SpreadValues(world, kFloats, 100 + world);
    const std::vector<const float*> buffers = Pointers(values);
    std::vector<uint32_t> got(kFloats);
    for (int64_t i = 0; i < kFloats; ++i) {
      got[i] = Bits(OneShotRankOrderSum(buffers.data(), world, i));
    }
    std::vector<int> order(world);
    std::iota(order.begin(), order.end(), 0);
    do {
      bool same = true;
      for (int64_t i = 0; i < kFloats && same; ++i) {
        same = Bits(SumInOrder(values, order, i)) == got[i];
      }
      ASSERT_EQ(same, SameBitsAsRankOrder(order))
          << "world " << world << ": an order starting with rank " << order[0];
    } while (std::next_permutation(order.begin(), order.end()));
  }
}

// Rank q's copy of every rank's buffer, at addresses of its own (as each
// process maps its peers' buffers through IPC).
using RankViews = std::vector<std::vector<std::vector<float>>>;

// Element i as the calling rank q sums it through its own view, and whether
// an order starting at rank q would have given other bits.
uint32_t SumAsRank(const RankViews& views, int q, int64_t i,
                   bool* rotation_differs) {
  const int world = static_cast<int>(views.size());
  const std::vector<const float*> mine = Pointers(views[q]);
  const uint32_t got = Bits(OneShotRankOrderSum(mine.data(), world, i));
  std::vector<int> rotated(world);
  for (int k = 0; k < world; ++k) rotated[k] = (q + k) % world;
  *rotation_differs |= Bits(SumInOrder(views[q], rotated, i)) != got;
  return got;
}

TEST(OneShotOrderTest, EveryRankGetsTheSameBits) {
  constexpr int64_t kFloats = 1024;
  for (int world = 2; world <= kOneShotMaxRanks; ++world) {
    const auto values = SpreadValues(world, kFloats, 200 + world);
    const RankViews views(world, values);
    bool rotation_differs = false;
    for (int64_t i = 0; i < kFloats; ++i) {
      const uint32_t want = SumAsRank(views, 0, i, &rotation_differs);
      for (int q = 1; q < world; ++q) {
        ASSERT_EQ(SumAsRank(views, q, i, &rotation_differs), want)
            << "world " << world << " rank " << q << " element " << i;
      }
    }
    // The data can tell: from world 3 on, an order starting at the calling
    // rank would not agree (at world 2 both orders are one: a + b == b + a).
    EXPECT_EQ(rotation_differs, world > 2) << "world " << world;
  }
}

// Every element of both parities (the kernel's offset is parity *
// max_floats + i), against the plainest loop that says the order.
void ExpectReferenceLoop(int world, int64_t n) {
  const int64_t max_floats = n;
  const auto values = SpreadValues(world, 2 * max_floats, 300 + world);
  const std::vector<const float*> buffers = Pointers(values);
  for (int64_t offset = 0; offset < 2 * max_floats; ++offset) {
    float want = 0.0f;
    for (int r = 0; r < world; ++r) want += values[r][offset];
    ASSERT_EQ(Bits(OneShotRankOrderSum(buffers.data(), world, offset)),
              Bits(want))
        << "world " << world << " n " << n << " offset " << offset;
  }
}

TEST(OneShotOrderTest, MatchesAReferenceLoopForWorldsOneToEight) {
  // Sizes below, at and above one element a block and thread, and a decode
  // step's hidden size (the comm GPU test's sizes).
  for (int world = 1; world <= kOneShotMaxRanks; ++world) {
    for (int64_t n : {1, 31, 32, 6144, 12289, 1 << 16}) {
      ExpectReferenceLoop(world, n);
    }
  }
}

TEST(OneShotOrderTest, AZeroSumIsPositiveZeroAsTheSumStartsThere) {
  const std::vector<std::vector<float>> values(kOneShotMaxRanks, {-0.0f});
  const std::vector<const float*> buffers = Pointers(values);
  for (int world = 1; world <= kOneShotMaxRanks; ++world) {
    EXPECT_EQ(Bits(OneShotRankOrderSum(buffers.data(), world, 0)), Bits(0.0f))
        << "world " << world;
  }
}

}  // namespace
}  // namespace moetune::gpu
