// Plugin backends in the tuner: a spec may name one that a worker's probe
// offers; its points come from that probe (tiles, graph capture), are
// recorded in the normalised spec and planned from it alone afterwards,
// while native-only specs plan exactly as before.
#include "tuner/backend_catalog.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "kernels/backends/registry.h"
#include "tests/tuner/strategy_test_util.h"
#include "tuner/spec.h"
#include "tuner/sweep_plan.h"

namespace moetune::tuner {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TinyLayerSpec;

v1::Probe ProbeOf(const std::string& text) {
  v1::Probe probe;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &probe))
      << text;
  return probe;
}

// A GPU worker offering torch_grouped_bf16 (two tiles, graph capture) and
// a CPU worker offering numpy_reference; both also list native backends.
BackendCatalog TwoWorkers() {
  return BackendCatalog::FromProbes({
      ProbeOf(R"pb(
        backends { name: "fused_gemv" available: true }
        backends {
          name: "torch_grouped_bf16"
          available: true
          plugin: "/usr/bin/python3 host.py"
          tiles { block_n: 64 block_k: 128 }
          tiles { block_n: 128 block_k: 128 }
          graph_capturable: true
          runs_on_gpu: true
        }
        backends {
          name: "numpy_reference"
          available: false
          reason: "CPU backend; this worker drives GPU 0"
          plugin: "/usr/bin/python3 host.py"
        }
      )pb"),
      ProbeOf(R"pb(
        backends { name: "cpu_reference" available: true }
        backends {
          name: "numpy_reference"
          available: true
          plugin: "/usr/bin/python3 host.py"
        }
      )pb"),
  });
}

// (backend, tile, cuda_graph) of each point, in grid order.
std::vector<std::string> Points(const SweepPlan& plan) {
  std::vector<std::string> rows;
  for (const v1::Trial& t : plan.AllPoints()) {
    const v1::TileShape& tile = t.config().tile();
    rows.push_back(t.config().moe_backend() + " " +
                   (tile.block_n() == 0 ? std::string("-")
                                        : std::to_string(tile.block_n()) + "x" +
                                              std::to_string(tile.block_k())) +
                   (t.config().cuda_graph() ? " graph" : ""));
  }
  return rows;
}

TEST(BackendCatalogTest, OffersThePluginBackendsOfTheProbes) {
  const BackendCatalog catalog = TwoWorkers();
  EXPECT_TRUE(catalog.IsPlugin("numpy_reference"));
  EXPECT_FALSE(catalog.IsPlugin("fused_gemv"));
  EXPECT_EQ(catalog.Find("fused_gemv"), backends::FindBackend("fused_gemv"));
  const backends::BackendDescriptor* torch = catalog.Find("torch_grouped_bf16");
  ASSERT_NE(torch, nullptr);
  EXPECT_TRUE(torch->is_gpu());
  EXPECT_TRUE(torch->graph_capturable);
  EXPECT_EQ(torch->TileList(), "64x128, 128x128");
  EXPECT_FALSE(torch->times_decode_step);
  EXPECT_FALSE(catalog.Find("numpy_reference")->is_gpu());
  EXPECT_EQ(catalog.Find("no_such"), nullptr);
  EXPECT_THAT(catalog.AllowedText(),
              HasSubstr("; plugin backends of the registered workers: "
                        "numpy_reference, torch_grouped_bf16"));
}

TEST(BackendCatalogTest, AvailableOffersDecideTheTiles) {
  // One worker's unavailable probe lists a tile the available one lacks.
  const BackendCatalog catalog = BackendCatalog::FromProbes({
      ProbeOf(R"pb(backends {
                     name: "p"
                     plugin: "p"
                     tiles { block_n: 1 block_k: 2 }
                   })pb"),
      ProbeOf(R"pb(backends {
                     name: "p"
                     available: true
                     plugin: "p"
                     tiles { block_n: 8 block_k: 64 }
                   })pb"),
  });
  EXPECT_EQ(catalog.Find("p")->TileList(), "8x64");
}

TEST(BackendCatalogTest, ProbesOfNativeNamesOrWithoutAPluginAreNotPlugins) {
  const BackendCatalog catalog = BackendCatalog::FromProbes({ProbeOf(R"pb(
    backends { name: "cpu_blocked" plugin: "impostor" available: true }
    backends { name: "orphan" available: true }
  )pb")});
  EXPECT_FALSE(catalog.IsPlugin("cpu_blocked"));
  EXPECT_FALSE(catalog.IsPlugin("orphan"));
  EXPECT_EQ(catalog.Find("cpu_blocked"), backends::FindBackend("cpu_blocked"));
}

TEST(BackendCatalogTest, PluginPointsComeFromTheProbeAndAreRecorded) {
  const v1::SweepSpec spec = TinyLayerSpec(R"pb(
    space {
      moe_backends: "cpu_reference"
      moe_backends: "numpy_reference"
      moe_backends: "torch_grouped_bf16"
      tiles { block_n: 128 block_k: 128 }
      cuda_graph: false
      cuda_graph: true
    }
  )pb");
  const auto plan = SweepPlan::Create(spec, TwoWorkers());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Points(**plan),
              ElementsAre("cpu_reference -", "numpy_reference -",
                          "torch_grouped_bf16 128x128",
                          "torch_grouped_bf16 128x128 graph"));
  const auto& recorded = (*plan)->spec().space().plugin_backends();
  ASSERT_EQ(recorded.size(), 2);
  EXPECT_EQ(recorded[0].name(), "numpy_reference");
  EXPECT_EQ(recorded[1].name(), "torch_grouped_bf16");
  // A stored sweep plans the same points with no worker registered.
  EXPECT_EQ(Points(*SweepPlan::FromNormalized((*plan)->spec())),
            Points(**plan));
}

TEST(BackendCatalogTest, WithoutATileListedThePluginTakesItsFirst) {
  const v1::SweepSpec spec =
      TinyLayerSpec(R"pb(space { moe_backends: "torch_grouped_bf16" })pb");
  const auto plan = SweepPlan::Create(spec, TwoWorkers());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Points(**plan), ElementsAre("torch_grouped_bf16 64x128"));
}

TEST(BackendCatalogTest, NativeSpecsAreNormalisedAsWithoutACatalog) {
  const v1::SweepSpec spec = TinyLayerSpec(R"pb(space {
                                                  moe_backends: "cpu_reference"
                                                  moe_backends: "cpu_blocked"
                                                })pb");
  const auto with = NormalizeSpec(spec, TwoWorkers());
  const auto without = NormalizeSpec(spec);
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_EQ(with->SerializeAsString(), without->SerializeAsString());
  EXPECT_TRUE(with->space().plugin_backends().empty());
}

TEST(BackendCatalogTest, ASubmittedRecordIsReplacedByTheCatalogs) {
  v1::SweepSpec spec =
      TinyLayerSpec(R"pb(space { moe_backends: "cpu_reference" })pb");
  spec.mutable_space()->add_plugin_backends()->set_name("forged");
  const auto normalized = NormalizeSpec(spec, TwoWorkers());
  ASSERT_TRUE(normalized.ok()) << normalized.status();
  EXPECT_TRUE(normalized->space().plugin_backends().empty());
}

TEST(BackendCatalogTest, RefusalsNameTheBackendAndWhatIsOffered) {
  const v1::SweepSpec spec =
      TinyLayerSpec(R"pb(space { moe_backends: "numpy_reference" })pb");
  EXPECT_THAT(ValidateSweepSpec(spec).message(),
              HasSubstr("space.moe_backends[0]: unknown backend "
                        "'numpy_reference'; allowed: native: cpu_reference"));
  v1::SweepSpec step = spec;
  step.mutable_workload()->set_region(v1::DECODE_STEP);
  EXPECT_THAT(ValidateSweepSpec(step, TwoWorkers()).message(),
              HasSubstr("workload.region: DECODE_STEP is not timed by "
                        "'numpy_reference'"));
  v1::SweepSpec chain =
      TinyLayerSpec(R"pb(space { moe_backends: "torch_grouped_bf16" })pb");
  chain.mutable_workload()->set_chain_layers(2);
  EXPECT_THAT(ValidateSweepSpec(chain, TwoWorkers()).message(),
              HasSubstr("workload.chain_layers: 'torch_grouped_bf16' is a "
                        "plugin backend"));
  v1::SweepSpec tile = spec;
  tile.mutable_space()->add_tiles()->set_block_n(3);
  EXPECT_THAT(ValidateSweepSpec(tile, TwoWorkers()).message(),
              HasSubstr("space.tiles[0]"));
}

}  // namespace
}  // namespace moetune::tuner
