// Timing statistics of one trial's raw samples: order statistics, moments and
// a bootstrap confidence interval of the median, plus the overlap test that
// winner selection uses to call ties. Everything here is a pure function of
// its arguments (the bootstrap uses its own seeded PRNG, so the interval is
// bit-identical across platforms and standard libraries); thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "proto/moetune.pb.h"

namespace moetune::stats {

// Resamples drawn for the bootstrap interval of the median.
inline constexpr int kBootstrapResamples = 2000;

// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, and fully specified, so a
// seed gives the same stream everywhere (std::mt19937 does too, but the
// std distributions on top of it do not).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [0, n) for n > 0 (Lemire's multiply-high; the bias is below
  // n / 2^64, far under anything a bootstrap can see).
  uint64_t Below(uint64_t n);

 private:
  uint64_t state_;
};

// The q-quantile (q in [0, 1]) of ascending `sorted`, by linear interpolation
// between closest ranks: h = (n - 1) * q, x[floor h] + (h - floor h) *
// (x[floor h + 1] - x[floor h]) (Hyndman & Fan type 7, NumPy's default). So
// the median of an even count is the mean of the two middle values. Empty
// input gives 0.
double Percentile(const std::vector<double>& sorted, double q);

// Summary of raw timed samples (microseconds): samples, median, mean, p90,
// p99 (Percentile above), sample standard deviation (n - 1 denominator; 0 for
// one sample), min, and the 95% bootstrap interval of the median
// (kBootstrapResamples resamples with replacement, percentile method: the
// 2.5% and 97.5% quantiles of the resampled medians), deterministic for a
// given seed. Non-finite samples are dropped (so `samples` says how many
// counted); no samples gives all zeros. Cost O(kBootstrapResamples * n):
// about 1 s for 100000 samples on one core, microseconds for the usual 20.
v1::TimingStats Summarize(const std::vector<double>& samples_us,
                          uint64_t seed = 1);

// True when the closed intervals [ci_low_us, ci_high_us] of a and b share a
// point. Touching endpoints count as overlap: a tie is the cautious answer.
bool IntervalsOverlap(const v1::TimingStats& a, const v1::TimingStats& b);

}  // namespace moetune::stats
