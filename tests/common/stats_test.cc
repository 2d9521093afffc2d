#include "common/stats.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace moetune::stats {
namespace {

TEST(PercentileTest, LinearInterpolationBetweenClosestRanks) {
  const std::vector<double> v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  // h = 9 * q: q = 0.9 -> h = 8.1 -> 9 + 0.1 * (10 - 9).
  EXPECT_DOUBLE_EQ(Percentile(v, 0.9), 9.1);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.99), 9.91);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.5), 5.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 1.0), 10.0);
  EXPECT_DOUBLE_EQ(Percentile({}, 0.5), 0.0);
  EXPECT_DOUBLE_EQ(Percentile({7}, 0.9), 7.0);
}

TEST(SummarizeTest, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(Summarize({3, 1, 2}).median_us(), 2.0);
  EXPECT_DOUBLE_EQ(Summarize({4, 1, 3, 2}).median_us(), 2.5);
  EXPECT_DOUBLE_EQ(Summarize({10, 30}).median_us(), 20.0);
}

TEST(SummarizeTest, HandComputedMoments) {
  // Unsorted on purpose. mean 5; squared deviations 9+1+1+1+0+0+4+16 = 32;
  // sample variance 32 / 7.
  const v1::TimingStats s = Summarize({9, 2, 4, 4, 5, 4, 7, 5});
  EXPECT_EQ(s.samples(), 8);
  EXPECT_DOUBLE_EQ(s.mean_us(), 5.0);
  EXPECT_DOUBLE_EQ(s.stddev_us(), std::sqrt(32.0 / 7.0));
  EXPECT_DOUBLE_EQ(s.min_us(), 2.0);
  EXPECT_DOUBLE_EQ(s.median_us(), 4.5);
  // Sorted: 2 4 4 4 5 5 7 9; p90: h = 6.3 -> 7 + 0.3 * 2.
  EXPECT_DOUBLE_EQ(s.p90_us(), 7.6);
  // p99: h = 6.93 -> 7 + 0.93 * 2.
  EXPECT_DOUBLE_EQ(s.p99_us(), 8.86);
}

TEST(SummarizeTest, TenValues) {
  const v1::TimingStats s = Summarize({10, 9, 8, 7, 6, 5, 4, 3, 2, 1});
  EXPECT_DOUBLE_EQ(s.p90_us(), 9.1);
  EXPECT_DOUBLE_EQ(s.p99_us(), 9.91);
  EXPECT_DOUBLE_EQ(s.median_us(), 5.5);
  EXPECT_DOUBLE_EQ(s.mean_us(), 5.5);
  // Sum of squared deviations of 1..10 from 5.5 is 82.5; / 9.
  EXPECT_DOUBLE_EQ(s.stddev_us(), std::sqrt(82.5 / 9.0));
}

TEST(SummarizeTest, EmptyIsAllZeros) {
  const v1::TimingStats s = Summarize({});
  EXPECT_EQ(s.samples(), 0);
  EXPECT_EQ(s.median_us(), 0);
  EXPECT_EQ(s.mean_us(), 0);
  EXPECT_EQ(s.p90_us(), 0);
  EXPECT_EQ(s.p99_us(), 0);
  EXPECT_EQ(s.stddev_us(), 0);
  EXPECT_EQ(s.min_us(), 0);
  EXPECT_EQ(s.ci_low_us(), 0);
  EXPECT_EQ(s.ci_high_us(), 0);
}

TEST(SummarizeTest, OneSampleHasZeroStddevAndPointInterval) {
  const v1::TimingStats s = Summarize({42.5});
  EXPECT_EQ(s.samples(), 1);
  EXPECT_EQ(s.stddev_us(), 0);
  EXPECT_EQ(s.ci_low_us(), 42.5);
  EXPECT_EQ(s.ci_high_us(), 42.5);
}

TEST(SummarizeTest, NonFiniteSamplesAreDropped) {
  const v1::TimingStats s = Summarize({1, NAN, 3, INFINITY});
  EXPECT_EQ(s.samples(), 2);
  EXPECT_DOUBLE_EQ(s.median_us(), 2.0);
}

TEST(SummarizeTest, ConstantSamplesHaveZeroWidthInterval) {
  const v1::TimingStats s = Summarize(std::vector<double>(50, 7.0));
  EXPECT_EQ(s.ci_low_us(), 7.0);
  EXPECT_EQ(s.ci_high_us(), 7.0);
}

// Deterministic, noisy-looking samples around 100 us.
std::vector<double> Noisy(int n, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    v.push_back(100.0 + static_cast<double>(rng.Below(1000)) / 100.0);
  }
  return v;
}

TEST(BootstrapTest, IntervalContainsMedianAndIsDeterministic) {
  const std::vector<double> samples = Noisy(40, 7);
  const v1::TimingStats a = Summarize(samples, 123);
  const v1::TimingStats b = Summarize(samples, 123);
  EXPECT_LE(a.ci_low_us(), a.median_us());
  EXPECT_GE(a.ci_high_us(), a.median_us());
  EXPECT_LT(a.ci_low_us(), a.ci_high_us());
  EXPECT_EQ(a.ci_low_us(), b.ci_low_us());
  EXPECT_EQ(a.ci_high_us(), b.ci_high_us());
  // The interval lies within the data.
  EXPECT_GE(a.ci_low_us(), a.min_us());
}

TEST(BootstrapTest, SeedChangesOnlyTheInterval) {
  const std::vector<double> samples = Noisy(40, 7);
  const v1::TimingStats a = Summarize(samples, 1);
  const v1::TimingStats b = Summarize(samples, 2);
  EXPECT_EQ(a.median_us(), b.median_us());
  EXPECT_TRUE(a.ci_low_us() != b.ci_low_us() ||
              a.ci_high_us() != b.ci_high_us());
}

TEST(BootstrapTest, NarrowsWithMoreSamples) {
  const v1::TimingStats few = Summarize(Noisy(10, 3));
  const v1::TimingStats many = Summarize(Noisy(1000, 3));
  EXPECT_LT(many.ci_high_us() - many.ci_low_us(),
            0.5 * (few.ci_high_us() - few.ci_low_us()));
}

TEST(BootstrapTest, SameForEveryOrderOfTheSamples) {
  std::vector<double> samples = Noisy(25, 9);
  const v1::TimingStats a = Summarize(samples);
  std::reverse(samples.begin(), samples.end());
  const v1::TimingStats b = Summarize(samples);
  EXPECT_EQ(a.ci_low_us(), b.ci_low_us());
  EXPECT_EQ(a.ci_high_us(), b.ci_high_us());
}

// The straightforward bootstrap: resample, sort, take the median. Summarize
// draws the same indices into the sorted samples but counts instead of
// sorting; both must give the same interval.
std::pair<double, double> NaiveBootstrap(std::vector<double> samples,
                                         uint64_t seed) {
  std::sort(samples.begin(), samples.end());
  SplitMix64 rng(seed);
  std::vector<double> medians;
  for (int r = 0; r < kBootstrapResamples; ++r) {
    std::vector<double> resample;
    for (size_t i = 0; i < samples.size(); ++i) {
      resample.push_back(samples[rng.Below(samples.size())]);
    }
    std::sort(resample.begin(), resample.end());
    medians.push_back(Percentile(resample, 0.5));
  }
  std::sort(medians.begin(), medians.end());
  return {Percentile(medians, 0.025), Percentile(medians, 0.975)};
}

TEST(BootstrapTest, MatchesNaiveResampling) {
  for (int n : {2, 3, 10, 31, 64}) {
    const std::vector<double> samples = Noisy(n, 100 + n);
    const v1::TimingStats s = Summarize(samples, 77);
    const auto [low, high] = NaiveBootstrap(samples, 77);
    EXPECT_DOUBLE_EQ(s.ci_low_us(), low) << n;
    EXPECT_DOUBLE_EQ(s.ci_high_us(), high) << n;
  }
}

TEST(SplitMix64Test, KnownFirstOutputs) {
  // Reference values of splitmix64 seeded with 0 (as in Vigna's
  // splitmix64.c): the stream must not drift across platforms.
  SplitMix64 rng(0);
  EXPECT_EQ(rng.Next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(rng.Next(), 0x6e789e6aa1b965f4ULL);
}

TEST(SplitMix64Test, BelowStaysInRange) {
  SplitMix64 rng(5);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(rng.Below(7), 7u);
}

TEST(IntervalsOverlapTest, ClosedIntervals) {
  v1::TimingStats a, b;
  a.set_ci_low_us(10);
  a.set_ci_high_us(20);
  b.set_ci_low_us(20);
  b.set_ci_high_us(30);
  EXPECT_TRUE(IntervalsOverlap(a, b));  // touching counts
  EXPECT_TRUE(IntervalsOverlap(b, a));
  b.set_ci_low_us(20.001);
  EXPECT_FALSE(IntervalsOverlap(a, b));
  EXPECT_FALSE(IntervalsOverlap(b, a));
  b.set_ci_low_us(12);
  b.set_ci_high_us(15);  // inside
  EXPECT_TRUE(IntervalsOverlap(a, b));
}

}  // namespace
}  // namespace moetune::stats
