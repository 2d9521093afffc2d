#include "common/stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>

namespace moetune::stats {

uint64_t SplitMix64::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::Below(uint64_t n) {
  const unsigned __int128 wide = static_cast<unsigned __int128>(Next()) *
                                 static_cast<unsigned __int128>(n);
  return static_cast<uint64_t>(wide >> 64);
}

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const double h =
      static_cast<double>(sorted.size() - 1) * std::clamp(q, 0.0, 1.0);
  const size_t lo = static_cast<size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  const double frac = h - static_cast<double>(lo);
  return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

namespace {

// The median of one bootstrap resample. A resample of sorted data is fully
// described by how often each index was drawn, so instead of sorting n values
// we count draws and walk the counts to the middle order statistics: O(n) per
// resample, which keeps 2000 resamples of 100000 iterations affordable.
double ResampleMedian(const std::vector<double>& sorted, SplitMix64& rng,
                      std::vector<uint32_t>& counts) {
  const size_t n = sorted.size();
  std::fill(counts.begin(), counts.end(), 0u);
  for (size_t i = 0; i < n; ++i) ++counts[rng.Below(n)];
  // Same rule as Percentile(q = 0.5): order statistics lo and lo + 1.
  const size_t lo = (n - 1) / 2;
  const bool interpolate = (n - 1) % 2 == 1;
  size_t seen = 0;
  double lo_value = 0.0;
  for (size_t j = 0; j < n; ++j) {
    if (counts[j] == 0) continue;
    const size_t before = seen;
    seen += counts[j];
    if (before <= lo && lo < seen) {
      lo_value = sorted[j];
      if (!interpolate || lo + 1 < seen) return lo_value;
    } else if (before == lo + 1) {
      return 0.5 * (lo_value + sorted[j]);
    }
  }
  return lo_value;  // unreachable: the counts sum to n
}

void BootstrapMedianCi(const std::vector<double>& sorted, uint64_t seed,
                       v1::TimingStats& stats) {
  SplitMix64 rng(seed);
  std::vector<uint32_t> counts(sorted.size());
  std::vector<double> medians(kBootstrapResamples);
  for (double& median : medians) median = ResampleMedian(sorted, rng, counts);
  std::sort(medians.begin(), medians.end());
  stats.set_ci_low_us(Percentile(medians, 0.025));
  stats.set_ci_high_us(Percentile(medians, 0.975));
}

double SampleStddev(const std::vector<double>& values, double mean) {
  if (values.size() < 2) return 0.0;
  double sum_sq = 0.0;
  for (double v : values) sum_sq += (v - mean) * (v - mean);
  return std::sqrt(sum_sq / static_cast<double>(values.size() - 1));
}

}  // namespace

v1::TimingStats Summarize(const std::vector<double>& samples_us,
                          uint64_t seed) {
  std::vector<double> sorted;
  sorted.reserve(samples_us.size());
  for (double v : samples_us) {
    if (std::isfinite(v)) sorted.push_back(v);
  }
  v1::TimingStats stats;
  if (sorted.empty()) return stats;
  std::sort(sorted.begin(), sorted.end());
  const double mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) /
                      static_cast<double>(sorted.size());
  stats.set_samples(static_cast<int32_t>(sorted.size()));
  stats.set_median_us(Percentile(sorted, 0.5));
  stats.set_mean_us(mean);
  stats.set_p90_us(Percentile(sorted, 0.9));
  stats.set_p99_us(Percentile(sorted, 0.99));
  stats.set_stddev_us(SampleStddev(sorted, mean));
  stats.set_min_us(sorted.front());
  BootstrapMedianCi(sorted, seed, stats);
  return stats;
}

bool IntervalsOverlap(const v1::TimingStats& a, const v1::TimingStats& b) {
  return a.ci_low_us() <= b.ci_high_us() && b.ci_low_us() <= a.ci_high_us();
}

}  // namespace moetune::stats
