// The backends' one source of facts: every listed backend has a descriptor
// that agrees with its own rules, CPU backends have an MoE layer, and the
// shape rules say why, naming the backend.
#include "kernels/backends/registry.h"

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backends/cpu/cpu_registry.h"
#include "kernels/backends/limits.h"

namespace moetune::backends {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr LayerShape kGlm5{6144, 2048, 1};

TEST(RegistryTest, EveryBackendIsListedOnceInListOrder) {
  std::set<std::string_view> names;
  for (const BackendDescriptor* backend : AllBackends()) {
    EXPECT_TRUE(names.insert(backend->name).second) << backend->name;
    EXPECT_EQ(FindBackend(backend->name), backend);
    EXPECT_FALSE(backend->description.empty()) << backend->name;
  }
  EXPECT_EQ(KnownBackendNames(),
            "cpu_reference, cpu_blocked, dequant_cublas, fused_gemv, "
            "fused_gemv_fp8, fused_gemv_wgmma, grouped_mma, grouped_wgmma, "
            "native_fp4");
  EXPECT_EQ(FindBackend("no_such_backend"), nullptr);
}

TEST(RegistryTest, CpuBackendsHaveAnMoeLayerAndGpuBackendsDoNot) {
  for (const BackendDescriptor* backend : AllBackends()) {
    EXPECT_EQ(FindCpuMoe(backend->name) != nullptr, !backend->is_gpu())
        << backend->name;
    // Every backend with a kernel times the whole step too.
    EXPECT_EQ(backend->times_decode_step, backend->gpu.not_implemented.empty())
        << backend->name;
    EXPECT_EQ(backend->error_bound, backend->is_gpu() ? 2e-2 : 1e-4);
  }
}

// The trusted GPU path's hosts come from the descriptors alone: GPU
// backends with kernels, in their trusted_path_order, at least one taking
// every batch (moetune-kernel-bench takes the first that runs the batch).
TEST(RegistryTest, TrustedPathHostsAreTheDescriptorsThatSaySo) {
  std::vector<std::string_view> names;
  int previous = 0;
  bool any_batch = false;
  for (const BackendDescriptor* host : TrustedPathBackends()) {
    names.push_back(host->name);
    EXPECT_TRUE(host->is_gpu()) << host->name;
    EXPECT_TRUE(host->gpu.not_implemented.empty()) << host->name;
    EXPECT_GT(host->trusted_path_order, previous) << host->name;
    previous = host->trusted_path_order;
    any_batch = any_batch || host->max_batch == 0;
  }
  EXPECT_THAT(names,
              ElementsAre("fused_gemv", "grouped_mma", "dequant_cublas"));
  EXPECT_TRUE(any_batch);
  int hosts = 0;
  for (const BackendDescriptor* backend : AllBackends()) {
    hosts += backend->trusted_path_order > 0 ? 1 : 0;
  }
  EXPECT_EQ(hosts, static_cast<int>(names.size()));
}

// At one token, but for fused_gemv_wgmma, which starts where the router's
// wide slots do (17 tokens).
TEST(RegistryTest, EveryDefaultTileRunsTheGlm5Layer) {
  for (const BackendDescriptor* backend : AllBackends()) {
    LayerShape shape = kGlm5;
    if (backend->name == "fused_gemv_wgmma") shape.batch = 17;
    EXPECT_EQ(backend->CanImplement(shape, backend->DefaultTile()), "")
        << backend->name;
  }
}

TEST(DescriptorTest, TileTextAndListsAreOneFormat) {
  EXPECT_EQ(TileText({16, 256}), "16x256");
  EXPECT_EQ(TileText({128, 256, 4}), "128x256s4");
  EXPECT_EQ(TileText({}), "-");
  EXPECT_EQ(FindBackend("grouped_wgmma")->TileList(),
            "128x256, 256x256, 128x128, 128x256s2, 128x128s4, 128x256s6");
  EXPECT_EQ(FindBackend("fused_gemv")->TileList(), "16x256, 16x512, 32x256");
  EXPECT_EQ(FindBackend("dequant_cublas")->TileList(), "");
  EXPECT_EQ(FindBackend("fused_gemv_fp8")->DefaultTile(), (Tile{128, 512}));
}

TEST(DescriptorTest, TileTextParsesBack) {
  for (const Tile want : {Tile{16, 256}, Tile{128, 256, 4}, Tile{}}) {
    Tile got{1, 1, 1};
    EXPECT_TRUE(ParseTileText(TileText(want), &got)) << TileText(want);
    EXPECT_EQ(got, want);
  }
  Tile untouched{7, 7};
  EXPECT_TRUE(ParseTileText("", &untouched));  // none: the backend's choice
  EXPECT_EQ(untouched, Tile{});
  for (const char* bad : {"16", "16x", "16x256s", "16x256s0", "16x256x4",
                          "0x256", "16x-256", "16x256s4q"}) {
    Tile kept{7, 7};
    EXPECT_FALSE(ParseTileText(bad, &kept)) << bad;
    EXPECT_EQ(kept, (Tile{7, 7})) << bad;
  }
}

TEST(DescriptorTest, CanImplementNamesTheBackendAndTheReason) {
  const BackendDescriptor& fused = *FindBackend("fused_gemv");
  EXPECT_THAT(fused.CanImplement(kGlm5, {8, 64}),
              HasSubstr("fused_gemv has no tile 8x64; tiles: 16x256"));
  // Serving batches: its wide kernel walks 64-token tiles.
  EXPECT_EQ(fused.CanImplement({6144, 2048, 512}, {16, 256}), "");
  EXPECT_THAT(fused.CanImplement({6144, 2048 / 64, 1}, {16, 256}),
              HasSubstr("multiples of 64"));
  const BackendDescriptor& fp8 = *FindBackend("fused_gemv_fp8");
  EXPECT_THAT(fp8.CanImplement({6144, 2048, 2}, {128, 512}),
              HasSubstr("runs one token"));
  EXPECT_THAT(fp8.CanImplement({6144, 2048 / 8, 1}, {128, 512}),
              HasSubstr("block_k must divide"));
  EXPECT_THAT(FindBackend("dequant_cublas")->CanImplement(kGlm5, {16, 256}),
              HasSubstr("takes no tile"));
  EXPECT_THAT(
      FindBackend("cpu_blocked")->CanImplement({256, 128, 1}, {16, 256}),
      HasSubstr("needs block_k to divide"));
  EXPECT_THAT(FindBackend("grouped_mma")
                  ->CanImplement({6144, 2048, kMaxBatchTokens + 1}, {64, 64}),
              HasSubstr("at most 4096 tokens"));
  // A ring depth is part of the tile: only the ring kernel lists one.
  EXPECT_THAT(fused.CanImplement(kGlm5, {16, 256, 4}),
              HasSubstr("fused_gemv has no tile 16x256s4"));
  const BackendDescriptor& grouped = *FindBackend("grouped_wgmma");
  EXPECT_EQ(grouped.CanImplement({6144, 2048, 256}, {128, 256, 2}), "");
  EXPECT_THAT(grouped.CanImplement({6144, 2048, 256}, {128, 256, 5}),
              HasSubstr("grouped_wgmma has no tile 128x256s5"));
}

// fused_gemv_wgmma: from 17 tokens; fused_gemv's rules at its tile (the
// narrow kernel's) and grouped_wgmma's 128x256 for the wide kernel.
TEST(DescriptorTest, FusedGemvWgmmaNamesWhichOfItsKernelsCannot) {
  const BackendDescriptor& hybrid = *FindBackend("fused_gemv_wgmma");
  EXPECT_EQ(hybrid.TileList(), FindBackend("fused_gemv")->TileList());
  EXPECT_THAT(hybrid.CanImplement({6144, 2048, 16}, {16, 512}),
              HasSubstr("needs at least 17 tokens (got 16)"));
  for (const int batch : {17, 64, 512, kMaxBatchTokens}) {
    EXPECT_EQ(hybrid.CanImplement({6144, 2048, batch}, {16, 512}), "");
    EXPECT_EQ(hybrid.CanImplement({6144, 2048 / 8, batch}, {32, 256}), "");
  }
  // A TP16 slice (inter 128): the narrow tile fits, the wide kernel's
  // block_k of 256 does not divide down's K.
  EXPECT_THAT(hybrid.CanImplement({6144, 2048 / 16, 64}, {16, 256}),
              HasSubstr("wide kernel (grouped_wgmma 128x256): block_k must "
                        "divide"));
  EXPECT_THAT(hybrid.CanImplement({6144, 2048 / 64, 64}, {16, 256}),
              HasSubstr("fused_gemv_wgmma tile 16x256: needs hidden"));
}

// A run or sweep that names no tile takes the default, or where that does
// not run the shape the first tile that does; the default when none does
// (so that the refusal names it).
TEST(DescriptorTest, TileForTakesTheFirstTileThatRunsTheShape) {
  const BackendDescriptor& fp8 = *FindBackend("fused_gemv_fp8");
  EXPECT_EQ(fp8.TileFor(kGlm5), (Tile{128, 512}));
  // A TP8 slice of 256: block_k 512 does not divide it, 256 does.
  EXPECT_EQ(fp8.TileFor({6144, 2048 / 8, 1}), (Tile{128, 256}));
  // A TP16 slice of 128: 128x128 (block_n 128 divides 2 x 128 too).
  EXPECT_EQ(fp8.TileFor({6144, 2048 / 16, 1}), (Tile{128, 128}));
  // Two tokens: no tile runs them.
  EXPECT_EQ(fp8.TileFor({6144, 2048 / 8, 2}), (Tile{128, 512}));
  EXPECT_EQ(FindBackend("dequant_cublas")->TileFor(kGlm5), Tile{});
}

// Where measurements name a tile for the shape, a run naming none takes
// it: fused_gemv on GLM-5 takes 32x256 on a TP8 slice and 16x512 on whole
// experts; on other dims (tiny) its list's first, 16x256.
TEST(DescriptorTest, TileForTakesTheMeasuredBestWhereThereIsOne) {
  const BackendDescriptor& fused = *FindBackend("fused_gemv");
  EXPECT_EQ(fused.TileFor({6144, 2048 / 8, 1}), (Tile{32, 256}));
  EXPECT_EQ(fused.TileFor({6144, 2048 / 8, 32}), (Tile{32, 256}));
  EXPECT_EQ(fused.TileFor({6144, 2048, 1}), (Tile{16, 512}));
  EXPECT_EQ(fused.TileFor({6144, 2048, 512}), (Tile{16, 512}));
  EXPECT_EQ(fused.TileFor({256, 128, 1}), (Tile{16, 256}));
  EXPECT_EQ(fused.DefaultTile(), (Tile{16, 256}));
  // fused_gemv_wgmma's tile is its narrow kernel's: fused_gemv's picks.
  const BackendDescriptor& hybrid = *FindBackend("fused_gemv_wgmma");
  EXPECT_EQ(hybrid.TileFor({6144, 2048, 64}), (Tile{16, 512}));
  EXPECT_EQ(hybrid.TileFor({6144, 2048 / 8, 32}), (Tile{32, 256}));
  // No measurement for fused_gemv_fp8: the first tile that runs the shape.
  EXPECT_EQ(FindBackend("fused_gemv_fp8")->measured_best, nullptr);
}

TEST(DescriptorTest, GpuNeedsSayWhatEachBackendUses) {
  EXPECT_TRUE(FindBackend("fused_gemv_fp8")->gpu.arch_specific);
  EXPECT_TRUE(FindBackend("dequant_cublas")->gpu.cublas);
  EXPECT_FALSE(FindBackend("dequant_cublas")->graph_capturable);
  EXPECT_EQ(FindBackend("native_fp4")->gpu.min_sm, 100);
  EXPECT_FALSE(FindBackend("native_fp4")->gpu.not_implemented.empty());
}

// sm_90a code runs on sm_90 alone; sm_90+ code on Hopper and every later
// GPU; CPU backends need no architecture.
TEST(DescriptorTest, DeviceRefusalNamesTheArchitectureAndTheDevice) {
  const BackendDescriptor& wgmma = *FindBackend("grouped_wgmma");
  EXPECT_EQ(wgmma.DeviceRefusal(90), "");
  EXPECT_EQ(wgmma.DeviceRefusal(80),
            "grouped_wgmma: needs sm_90a (wgmma), device is sm_80");
  EXPECT_EQ(wgmma.DeviceRefusal(100),
            "grouped_wgmma: needs sm_90a (wgmma), device is sm_100");
  EXPECT_EQ(wgmma.DeviceRefusal(120),
            "grouped_wgmma: needs sm_90a (wgmma), device is sm_120");
  const BackendDescriptor& gemv = *FindBackend("fused_gemv");
  EXPECT_EQ(gemv.DeviceRefusal(90), "");
  EXPECT_EQ(gemv.DeviceRefusal(100), "");
  EXPECT_EQ(gemv.DeviceRefusal(120), "");
  EXPECT_EQ(gemv.DeviceRefusal(86),
            "fused_gemv: needs sm_90+ (Hopper), device is sm_86");
  const BackendDescriptor& fp4 = *FindBackend("native_fp4");
  EXPECT_EQ(fp4.DeviceRefusal(90),
            "native_fp4: needs sm_100+ (FP4 tensor cores, tcgen05), device is "
            "sm_90");
  EXPECT_EQ(fp4.DeviceRefusal(100), "");
  EXPECT_EQ(FindBackend("cpu_blocked")->DeviceRefusal(0), "");
}

}  // namespace
}  // namespace moetune::backends
