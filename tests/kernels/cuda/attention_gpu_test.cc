// kernels/cuda/step/mla.cuh LaunchSparseAttention over the BF16 latent
// cache (the tensor-core split kernel, mla_mma.cuh, and the combine) against
// a CPU evaluation in double: GLM-5's rank of 8 heads x (512 + 64) at 2048
// kept tokens of 3000 with the new token among them or not, splits that end
// inside a block's 32 tokens, the tiny model's dims, one head a rank.
// Skips without a device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/moe/moe_gpu.h"
#include "tests/kernels/cuda/host_values.h"
#include "tests/kernels/cuda/step_kernels_runner.h"

namespace moetune::gpu::testing {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

// kept_n ascending distinct tokens of [0, context], the new token (index
// context) among them when `with_new`.
std::vector<int> Kept(int context, int kept_n, bool with_new, Values& v) {
  std::vector<int> all;
  for (int t = 0; t < context; ++t) all.push_back(t);
  for (size_t i = all.size(); i > 1; --i) {  // Fisher-Yates
    const size_t j = static_cast<size_t>((v.Next() + 1.0f) * 0.5f * i) % i;
    std::swap(all[i - 1], all[j]);
  }
  std::vector<int> kept(all.begin(),
                        all.begin() + (kept_n - (with_new ? 1 : 0)));
  if (with_new) kept.push_back(context);
  std::sort(kept.begin(), kept.end());
  return kept;
}

// Random queries, cache, new entry and kept lists for the shape.
AttentionData MakeData(const AttentionShape& sh,
                       const std::vector<int>& kept_per_seq, bool with_new) {
  const int dim = sh.kv_lora + sh.rope;
  Values v(99u + sh.context + sh.heads);
  AttentionData d;
  for (int i = 0; i < sh.batch * sh.heads * sh.kv_lora; ++i) {
    d.q_lat.push_back(v.Next() * 0.3f);
  }
  for (int i = 0; i < sh.batch * sh.heads * sh.rope; ++i) {
    d.q_rope.push_back(v.Next() * 0.3f);
  }
  for (int64_t i = 0; i < int64_t{sh.batch} * sh.cache_stride * dim; ++i) {
    d.latent.push_back(ToBf16(v.Next() * 2.0f));
  }
  for (int i = 0; i < sh.batch * dim; ++i) d.new_entry.push_back(v.Next());
  d.kept.assign(static_cast<size_t>(sh.batch) * sh.k, 0);
  for (int b = 0; b < sh.batch; ++b) {
    const std::vector<int> kept =
        Kept(sh.context, kept_per_seq[b], with_new, v);
    std::copy(kept.begin(), kept.end(), d.kept.begin() + b * sh.k);
    d.kept_n.push_back(static_cast<int>(kept.size()));
  }
  return d;
}

// Head h of sequence b in double: each output column's value and the
// magnitude of its terms (sum over tokens of p |entry|).
void Expected(const AttentionShape& sh, const AttentionData& d, int b, int h,
              std::vector<double>* want, std::vector<double>* mag) {
  const int dim = sh.kv_lora + sh.rope;
  auto entry = [&](int t, int j) {
    return t == sh.context
               ? double{d.new_entry[b * dim + j]}
               : FromBf16(
                     d.latent[(int64_t{b} * sh.cache_stride + t) * dim + j]);
  };
  auto query = [&](int j) {
    return j < sh.kv_lora
               ? double{d.q_lat[(b * sh.heads + h) * sh.kv_lora + j]}
               : double{
                     d.q_rope[(b * sh.heads + h) * sh.rope + j - sh.kv_lora]};
  };
  const int* kept = d.kept.data() + b * sh.k;
  std::vector<double> p;
  for (int i = 0; i < d.kept_n[b]; ++i) {
    double dot = 0;
    for (int j = 0; j < dim; ++j) dot += query(j) * entry(kept[i], j);
    p.push_back(dot * sh.scale);
  }
  const double m = *std::max_element(p.begin(), p.end());
  double sum = 0;
  for (double& x : p) sum += (x = std::exp(x - m));
  want->assign(sh.kv_lora, 0.0);
  mag->assign(sh.kv_lora, 0.0);
  for (int j = 0; j < sh.kv_lora; ++j) {
    for (size_t i = 0; i < p.size(); ++i) {
      const double e = entry(kept[i], j);
      (*want)[j] += p[i] / sum * e;
      (*mag)[j] += p[i] / sum * std::fabs(e);
    }
  }
}

// Runs the attention and checks every output to 1e-5 of its terms'
// magnitude, printing the worst error.
void ExpectAttentionMatches(const AttentionShape& sh,
                            const std::vector<int>& kept_per_seq,
                            bool with_new) {
  SCOPED_TRACE(::testing::Message()
               << "heads " << sh.heads << " " << sh.kv_lora << " + " << sh.rope
               << " context " << sh.context << " batch " << sh.batch
               << (sh.query_scratch ? " (queries made before)" : ""));
  const AttentionData d = MakeData(sh, kept_per_seq, with_new);
  std::vector<float> got;
  ASSERT_EQ(RunSparseAttention(sh, d, &got), "");
  double worst = 0;
  int bad = 0;
  std::vector<double> want, mag;
  for (int b = 0; b < sh.batch; ++b) {
    for (int h = 0; h < sh.heads; ++h) {
      Expected(sh, d, b, h, &want, &mag);
      const float* g =
          got.data() + (static_cast<size_t>(b) * sh.heads + h) * sh.kv_lora;
      for (int j = 0; j < sh.kv_lora; ++j) {
        const double err = std::fabs(g[j] - want[j]);
        worst = std::max(worst, err / (mag[j] + 1e-30));
        if (err > 1e-5 * mag[j] + 1e-30 && ++bad <= 5) {
          ADD_FAILURE() << "sequence " << b << " head " << h << " column " << j
                        << ": " << g[j] << " want " << want[j];
        }
      }
    }
  }
  EXPECT_EQ(bad, 0);
  std::printf(
      "attention heads %d dims %d + %d context %d: worst error %.2e "
      "of the magnitude\n",
      sh.heads, sh.kv_lora, sh.rope, sh.context, worst);
}

AttentionShape Shape(int heads, int kv_lora, int rope, int context, int batch,
                     int k) {
  AttentionShape s;
  s.heads = heads;
  s.kv_lora = kv_lora;
  s.rope = rope;
  s.context = context;
  s.batch = batch;
  s.k = k;
  s.cache_stride = context + 2;
  s.scale = 1.0f / std::sqrt(static_cast<float>(192));
  return s;
}

// A GLM-5 rank of world 8: 8 heads, 512 latent + 64 rope dims; the queries
// made once before the splits, and by each split block.
TEST(AttentionGpuTest, Glm5RankMatchesADoubleEvaluation) {
  SKIP_WITHOUT_GPU();
  for (bool scratch : {true, false}) {
    AttentionShape sh = Shape(8, 512, 64, 3000, 2, 2048);
    sh.query_scratch = scratch;
    ASSERT_TRUE(TensorCoreAttentionTakes(sh));
    ExpectAttentionMatches(sh, {2048, 2000}, true);  // the new token kept
    ExpectAttentionMatches(sh, {2048, 77}, false);   // not kept
    AttentionShape short_context = Shape(8, 512, 64, 40, 3, 2048);
    short_context.query_scratch = scratch;
    ExpectAttentionMatches(short_context, {41, 41, 41}, true);
  }
}

// Enough sequences for the queries to be made once before the split blocks
// (with the scratch), and by each block (without).
TEST(AttentionGpuTest, ManySequencesMatchWithTheQueriesMadeOnce) {
  SKIP_WITHOUT_GPU();
  const int batch = QueriesMadeBeforeFromBatch() + 1;
  for (bool scratch : {true, false}) {
    AttentionShape sh = Shape(8, 512, 64, 300, batch, 2048);
    sh.query_scratch = scratch;
    std::vector<int> kept(batch, 301);
    kept[1] = 150;
    ExpectAttentionMatches(sh, kept, true);
  }
}

// Split blocks of 4 and of 2 tiles of kept tokens (an online softmax across
// them, the next tile's entries copied while one is summed), as the launch
// takes them where it is told of fewer SMs: a block's last tile part full,
// the new token in a later tile than the first, a sequence whose kept
// tokens end in a block's first tile and one with fewer than a tile.
TEST(AttentionGpuTest, BlocksOfSeveralTilesMatch) {
  SKIP_WITHOUT_GPU();
  const int batch = QueriesMadeBeforeFromBatch() + 1;
  for (const auto& [sms, tiles] :
       {std::pair{1, 8}, std::pair{60, 4}, std::pair{100, 2}}) {
    AttentionShape sh = Shape(8, 512, 64, 3000, batch, 2048);
    sh.sm_count = sms;
    ASSERT_EQ(AttentionBlockTiles(sh), tiles) << sms << " SMs";
    std::vector<int> kept(batch, 2048);
    kept[1] = 2000;
    kept[2] = 77;
    kept[3] = 20;
    ExpectAttentionMatches(sh, kept, true);
    ExpectAttentionMatches(sh, kept, false);
  }
}

// The tiles a split block takes on an H200 (132 SMs), as measured
// (kernels/cuda/step/PERF.md): one below 8 sequences of a TP8 rank's 8
// heads, two at 8, four at 16, eight at 32; one without the queries' scratch.
// Host code only: runs without a device.
TEST(AttentionTilesTest, PicksTheMeasuredTilesForAnH200) {
  const auto tiles = [](int heads, int batch, bool scratch) {
    AttentionShape sh = Shape(heads, 512, 64, 4096, batch, 2048);
    sh.query_scratch = scratch;
    sh.sm_count = 132;
    return AttentionBlockTiles(sh);
  };
  for (int batch : {1, 2, 4, 7}) EXPECT_EQ(tiles(8, batch, true), 1) << batch;
  EXPECT_EQ(tiles(8, 8, true), 2);
  EXPECT_EQ(tiles(8, 16, true), 4);
  EXPECT_EQ(tiles(8, 32, true), 8);
  EXPECT_EQ(tiles(8, 32, false), 1);
  EXPECT_EQ(tiles(64, 1, true), 2);  // a data-parallel rank's 64 heads
}

// A data-parallel rank: all 64 heads, in groups of 8 (pairs of heads only
// where a few heads leave the GPU empty), the queries made once from two
// sequences on (with the scratch).
TEST(AttentionGpuTest, AllSixtyFourHeadsMatch) {
  SKIP_WITHOUT_GPU();
  for (bool scratch : {true, false}) {
    AttentionShape sh = Shape(64, 512, 64, 300, 3, 2048);
    sh.query_scratch = scratch;
    ExpectAttentionMatches(sh, {301, 150, 301}, true);
    AttentionShape one = Shape(64, 512, 64, 3000, 1, 2048);
    one.query_scratch = scratch;
    ExpectAttentionMatches(one, {2048}, false);
  }
}

// The tiny model's dims; one head a rank (TP64's shape).
TEST(AttentionGpuTest, OtherShapesMatch) {
  SKIP_WITHOUT_GPU();
  ExpectAttentionMatches(Shape(4, 64, 16, 30, 2, 16), {16, 9}, true);
  ExpectAttentionMatches(Shape(1, 512, 64, 500, 1, 2048), {501}, true);
  ExpectAttentionMatches(Shape(8, 512, 64, 0, 1, 2048), {1}, true);
}

}  // namespace
}  // namespace moetune::gpu::testing
