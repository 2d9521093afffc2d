// kernels/cuda/step/topk.cu LaunchTopK: the DSA indexer's top-k against the
// reference's rule (kernels/reference/attention.h TopKIndices: the k
// largest, ties at the boundary to the lower index, ascending) exactly, at
// the step's contexts (4096 and 32768 tokens + the new one: one block a
// sequence, and a cluster of blocks), at the one-block select's largest
// context and one past it, past one block's staged size, and with scores
// whose ties and spread exercise each pass of the radix select and the
// one-block select's ranked bin (a few keys, many equal keys, and more
// keys than it ranks, which take the radix passes). Skips without a device.
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/moe/moe_gpu.h"
#include "kernels/reference/attention.h"
#include "tests/kernels/cuda/host_values.h"
#include "tests/kernels/cuda/step_kernels_runner.h"

namespace moetune::gpu::testing {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

constexpr int kTopK = 2048;  // GLM-5's index_topk

// batch rows of n scores, score(row, i, values) each.
std::vector<float> Scores(int n, int batch,
                          const std::function<float(int, Values&)>& score) {
  Values v(99u + n + batch);
  std::vector<float> s(static_cast<size_t>(n) * batch);
  for (size_t i = 0; i < s.size(); ++i) s[i] = score(i % n, v);
  return s;
}

void ExpectReferenceTopK(const std::vector<float>& scores, int n, int k,
                         int batch) {
  SCOPED_TRACE(::testing::Message() << "n " << n << " batch " << batch);
  std::vector<std::vector<int>> kept;
  ASSERT_EQ(RunTopK(scores, n, k, batch, &kept), "");
  for (int b = 0; b < batch; ++b) {
    const std::vector<float> row(
        scores.begin() + static_cast<size_t>(b) * n,
        scores.begin() + static_cast<size_t>(b + 1) * n);
    EXPECT_EQ(kept[b], ref::TopKIndices(row, k)) << "row " << b;
  }
}

// Spread scores (an indexer's: weighted ReLUs, some exactly 0) at the
// step's lengths, a context within one top-k, and one past the staged keys.
TEST(TopKGpuTest, IndexerLikeScoresKeepTheReferenceSet) {
  SKIP_WITHOUT_GPU();
  const auto relu_sums = [](int, Values& v) {
    const float x = v.Next();
    return x < -0.3f ? 0.0f : std::exp(3.0f * x) * (x < 0.5f ? 1.0f : -0.2f);
  };
  for (int n : {100, kTopK, kTopK + 1, 4097, 8192, 8193, 32769}) {
    ExpectReferenceTopK(Scores(n, 2, relu_sums), n, kTopK, 2);
  }
  ExpectReferenceTopK(Scores(60001, 1, relu_sums), 60001, kTopK, 1);
  // Past a cluster's staged slices: one block reading the scores each pass.
  ExpectReferenceTopK(Scores(420001, 1, relu_sums), 420001, kTopK, 1);
}

// Few distinct values: the boundary value held by many keys, the lower
// indices among them kept; every score equal; the top k all one value.
TEST(TopKGpuTest, TiesKeepTheLowerIndices) {
  SKIP_WITHOUT_GPU();
  const auto few = [](int, Values& v) {
    return std::floor((v.Next() + 1.0f) * 25.0f);
  };
  const auto equal = [](int, Values&) { return 1.5f; };
  const auto hot_top = [](int i, Values& v) {
    return i % 7 == 0 ? 9.0f : v.Next();
  };
  for (int n : {4097, 8192, 32769}) {
    ExpectReferenceTopK(Scores(n, 3, few), n, kTopK, 3);
    ExpectReferenceTopK(Scores(n, 1, equal), n, kTopK, 1);
    ExpectReferenceTopK(Scores(n, 1, hot_top), n, kTopK, 1);
  }
}

// Scores over a wide range of magnitudes and both signs (the select's keys
// order negatives below positives), and a narrow one (keys sharing their
// top bytes, so the passes find the k-th key in the low bytes).
TEST(TopKGpuTest, WideAndNarrowRangesKeepTheReferenceSet) {
  SKIP_WITHOUT_GPU();
  const auto wide = [](int, Values& v) {
    return std::ldexp(v.Next(), static_cast<int>(v.Next() * 60.0f));
  };
  const auto narrow = [](int, Values& v) { return 1.0f + v.Next() * 1e-3f; };
  for (int n : {4097, 8192, 32769}) {
    ExpectReferenceTopK(Scores(n, 2, wide), n, kTopK, 2);
    ExpectReferenceTopK(Scores(n, 2, narrow), n, kTopK, 2);
  }
}

}  // namespace
}  // namespace moetune::gpu::testing
