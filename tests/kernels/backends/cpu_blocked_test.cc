#include "kernels/backends/cpu/cpu_blocked.h"

#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "kernels/backends/registry.h"
#include "kernels/reference/moe_reference.h"
#include "tests/kernels/reference/step_spec_util.h"

namespace moetune::cpu {
namespace {

using ref::RoutingSpec;
using ref::Shard;
using ref::StepSpec;

StepSpec Spec(const char* preset, int batch,
              RoutingSpec::Kind kind = RoutingSpec::Kind::kUniform) {
  StepSpec spec = ref::testing::PresetSpec(preset, 9);
  spec.batch = batch;
  spec.routing.kind = kind;
  spec.routing.skew = 1.2;
  return spec;
}

// "tiny" widened so that every tile of the list divides its K dims.
StepSpec WideSpec(int batch) {
  StepSpec spec = Spec("tiny", batch);
  spec.config.name = "tiny-wide";
  spec.config.hidden = 1024;
  spec.config.moe_intermediate = 1024;
  return spec;
}

using backends::Tile;

std::vector<Tile> BlockedTiles() {
  const auto tiles = backends::FindBackend("cpu_blocked")->tiles;
  return {tiles.begin(), tiles.end()};
}

double RelErr(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::fabs(double{a[i]} - b[i]));
    scale = std::max(scale, std::fabs(double{b[i]}));
  }
  return err / scale;
}

std::vector<float> Reference(const StepSpec& spec,
                             const std::vector<float>& x) {
  std::vector<float> y(x.size());
  ref::MoeLayerReference(spec, spec.config.num_dense_layers, x.data(),
                         spec.batch, y.data());
  return y;
}

// Runs the blocked backend on the reference's input and returns its
// relative error against `expected`. Runs twice: the second call uses the
// cached weights and must give the same bits.
double ErrorAgainst(const StepSpec& spec, Tile tile,
                    const std::vector<float>& x,
                    const std::vector<float>& expected) {
  const int layer = spec.config.num_dense_layers;
  std::vector<float> got(x.size()), again(x.size());
  auto moe = BlockedMoe::Create(spec, tile.block_n, tile.block_k);
  EXPECT_TRUE(moe.ok()) << moe.status();
  if (!moe.ok()) return INFINITY;
  EXPECT_TRUE((*moe)->Run(layer, x.data(), spec.batch, got.data()).ok());
  EXPECT_TRUE((*moe)->Run(layer, x.data(), spec.batch, again.data()).ok());
  EXPECT_EQ(got, again);
  return RelErr(got, expected);
}

double CompareWithReference(const StepSpec& spec, Tile tile) {
  const std::vector<float> x =
      ref::MoeLayerInput(spec, spec.config.num_dense_layers);
  return ErrorAgainst(spec, tile, x, Reference(spec, x));
}

TEST(CanImplementBlockedTest, ShapesTheKernelCannotDo) {
  const StepSpec tiny = Spec("tiny", 1);  // hidden 256, moe_inter 128
  EXPECT_TRUE(CanImplementBlocked(tiny, 4, 64).ok());
  EXPECT_TRUE(CanImplementBlocked(tiny, 8, 128).ok());
  const absl::Status big_k = CanImplementBlocked(tiny, 16, 256);
  EXPECT_EQ(big_k.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(big_k.message().find("kernel cannot do this shape"),
            std::string::npos);
  EXPECT_EQ(CanImplementBlocked(tiny, 32, 512).code(),
            absl::StatusCode::kFailedPrecondition);
  const absl::Status unlisted = CanImplementBlocked(tiny, 5, 64);
  EXPECT_EQ(unlisted.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(unlisted.message().find("4x64, 8x128, 16x256, 32x512"),
            std::string::npos)
      << unlisted;
  StepSpec sharded = tiny;
  sharded.shard = Shard{2, 1, 0};  // K slice of down: 64
  EXPECT_TRUE(CanImplementBlocked(sharded, 4, 64).ok());
  EXPECT_EQ(CanImplementBlocked(sharded, 8, 128).code(),
            absl::StatusCode::kFailedPrecondition);
  const StepSpec glm5 = Spec("glm5", 1);
  for (const Tile& tile : BlockedTiles()) {
    EXPECT_TRUE(CanImplementBlocked(glm5, tile.block_n, tile.block_k).ok());
  }
}

TEST(CanImplementBlockedTest, BadProblemsAreInvalidArgument) {
  StepSpec spec = Spec("tiny", 0);
  EXPECT_EQ(CanImplementBlocked(spec, 4, 64).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockedMoe::Create(spec, 4, 64).status().code(),
            absl::StatusCode::kInvalidArgument);
  spec = Spec("tiny", 1);
  spec.shard = Shard{1, 1, 3};
  EXPECT_EQ(CanImplementBlocked(spec, 4, 64).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BlockedMoeTest, RunRejectsDenseLayersAndBadBatches) {
  const StepSpec spec = Spec("tiny", 1);
  auto moe = BlockedMoe::Create(spec, 4, 64);
  ASSERT_TRUE(moe.ok());
  std::vector<float> x(256, 0.1f), y(256);
  EXPECT_EQ((*moe)->Run(0, x.data(), 1, y.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*moe)->Run(1, x.data(), 0, y.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*moe)->Run(1, nullptr, 1, y.data()).code(),
            absl::StatusCode::kInvalidArgument);
}

// Every tile on tiny: those that fit match the reference, the others say
// why (FAILED_PRECONDITION), for batch 1, 3 and 16, uniform and skewed.
TEST(BlockedMoeTest, MatchesReferenceOnTinyForEveryTile) {
  for (auto kind : {RoutingSpec::Kind::kUniform, RoutingSpec::Kind::kSkewed}) {
    for (int batch : {1, 3, 16}) {
      const StepSpec spec = Spec("tiny", batch, kind);
      int implemented = 0;
      for (const Tile& tile : BlockedTiles()) {
        const absl::Status can =
            CanImplementBlocked(spec, tile.block_n, tile.block_k);
        if (!can.ok()) {
          EXPECT_EQ(can.code(), absl::StatusCode::kFailedPrecondition);
          continue;
        }
        ++implemented;
        EXPECT_LT(CompareWithReference(spec, tile), 1e-5)
            << tile.block_n << "x" << tile.block_k << " batch " << batch;
      }
      EXPECT_EQ(implemented, 2);  // 4x64 and 8x128
    }
  }
}

// The larger tiles, on a widened tiny where they all fit (batch 16 is
// covered on tiny; here it would cost seconds).
TEST(BlockedMoeTest, MatchesReferenceOnWideTinyForEveryTile) {
  for (int batch : {1, 3}) {
    const StepSpec spec = WideSpec(batch);
    const std::vector<float> x =
        ref::MoeLayerInput(spec, spec.config.num_dense_layers);
    const std::vector<float> expected = Reference(spec, x);
    for (const Tile& tile : BlockedTiles()) {
      EXPECT_LT(ErrorAgainst(spec, tile, x, expected), 1e-5)
          << tile.block_n << "x" << tile.block_k << " batch " << batch;
    }
  }
}

// Each rank of a tp=2 x ep=2 grid matches the reference's partial output.
TEST(BlockedMoeTest, MatchesReferenceOnShards) {
  for (int batch : {1, 3, 16}) {
    for (int rank = 0; rank < 4; ++rank) {
      StepSpec spec = Spec("tiny", batch, RoutingSpec::Kind::kSkewed);
      spec.shard = Shard{2, 2, rank};
      EXPECT_LT(CompareWithReference(spec, Tile{4, 64}), 1e-5)
          << "rank " << rank << " batch " << batch;
    }
  }
  StepSpec wide = WideSpec(3);
  for (int rank = 0; rank < 4; ++rank) {
    wide.shard = Shard{2, 2, rank};
    EXPECT_LT(CompareWithReference(wide, Tile{32, 512}), 1e-5) << rank;
  }
}

// The real GLM-5 dims, batch 1, one tile (K = 6144 and 2048): about 3 s.
TEST(BlockedMoeTest, MatchesReferenceOnGlm5) {
  EXPECT_LT(CompareWithReference(Spec("glm5", 1), Tile{16, 256}), 1e-5);
}

}  // namespace
}  // namespace moetune::cpu
