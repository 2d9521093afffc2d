// Plugin backends through the whole system: a CPU worker started with
// --plugins offers the Python plugin host's numpy_reference and a fake
// plugin that answers zeros; the coordinator accepts a spec naming them
// only because that worker's probe offers them, plans them from the probe,
// and records each trial as the worker's check judged it.
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace moetune::e2e {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

const std::string kPython = "/usr/bin/python3";

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// numpy_reference served by the plugin host; "fake" by the fake plugin,
// whose output is all zeros.
fs::path WritePluginFile(const fs::path& dir) {
  const fs::path path = dir / "plugins.json";
  std::ofstream(path)
      << R"({"plugins": [{"backend": "numpy_reference", "command": [")"
      << kPython << R"(", ")" << kSource
      << R"(/worker/plugins/moetune_plugin_host.py"]}, {"backend": "fake",)"
      << R"( "command": [")" << kPython << R"(", ")" << kSource
      << R"(/tests/worker/plugins/fake_plugin.py", "zeros"]}]})";
  return path;
}

// One MoE layer of the tiny preset, batch 3, over `backends`.
fs::path WriteSpec(const fs::path& dir, const std::vector<std::string>& names) {
  v1::SweepSpec spec;
  spec.set_name("plugins");
  spec.mutable_workload()->set_model_preset("tiny");
  spec.mutable_workload()->add_batch_sizes(3);
  spec.mutable_workload()->add_context_lengths(64);
  spec.mutable_workload()->set_region(v1::MOE_LAYER);
  for (const std::string& name : names) {
    spec.mutable_space()->add_moe_backends(name);
  }
  spec.mutable_measurement()->set_iterations(3);
  spec.mutable_measurement()->set_warmup_iterations(1);
  spec.mutable_measurement()->set_trial_timeout_s(60);
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(spec, &json).ok());
  const fs::path path = dir / "spec.json";
  std::ofstream(path) << json;
  return path;
}

// Starts a coordinator and the plugin worker, and waits for the worker to
// register: a spec may name a plugin backend once a worker offers it.
class PluginsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("plugins");
    cluster_ = std::make_unique<Cluster>(dir_);
    cluster_->AddWorker("e2e:plugins", "",
                        {"--plugins=" + WritePluginFile(dir_).string(),
                         "--model_library=" MOETUNE_MODEL_LIBRARY});
    ASSERT_TRUE(WaitFor(
        [&] {
          return RunCommand(kBin + "/moetune workers --coordinator=" +
                            cluster_->address())
                     .output.find("e2e:plugins") != std::string::npos;
        },
        60000))
        << ReadText(dir_ / "plugins.log");
  }

  CommandResult Sweep(const fs::path& spec) {
    return RunCommand(kBin + "/moetune sweep --coordinator=" +
                      cluster_->address() + " --spec=" + spec.string());
  }

  fs::path dir_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(PluginsTest, PluginBackendsAreSweptAndCheckedBesideNativeOnes) {
  const CommandResult sweep =
      Sweep(WriteSpec(dir_, {"cpu_reference", "numpy_reference", "fake"}));
  EXPECT_EQ(sweep.exit_code, 0) << sweep.output;
  const std::vector<v1::Trial> trials = cluster_->Trials(1);
  ASSERT_EQ(trials.size(), 3u) << sweep.output;
  std::map<std::string, v1::Trial> by_backend;
  for (const v1::Trial& t : trials) by_backend[t.config().moe_backend()] = t;
  for (const std::string name : {"cpu_reference", "numpy_reference"}) {
    const v1::Trial& t = by_backend[name];
    EXPECT_EQ(t.state(), v1::DONE) << t.ShortDebugString();
    EXPECT_EQ(t.result().samples_us_size(), 3) << name;
    EXPECT_LT(t.result().max_rel_error(), 1e-4) << name;
    EXPECT_GT(t.result().roofline().floor_us(), 0) << name;
  }
  EXPECT_DOUBLE_EQ(by_backend["numpy_reference"].result().error_bound(), 1e-4);
  // The fake plugin's one tile, from its probe; its zeros are caught.
  const v1::Trial& fake = by_backend["fake"];
  EXPECT_EQ(fake.state(), v1::INCORRECT) << fake.ShortDebugString();
  EXPECT_EQ(fake.config().tile().block_n(), 8);
  EXPECT_EQ(fake.config().tile().block_k(), 64);
  EXPECT_THAT(sweep.output, HasSubstr("numpy_reference"));
}

TEST_F(PluginsTest, ABackendNoWorkerOffersIsRefusedListingBothKinds) {
  const CommandResult sweep =
      Sweep(WriteSpec(dir_, {"cpu_reference", "torch_grouped_fp9"}));
  EXPECT_EQ(sweep.exit_code, 2) << sweep.output;
  EXPECT_THAT(sweep.output, HasSubstr("space.moe_backends[1]: unknown backend "
                                      "'torch_grouped_fp9'; allowed: native: "
                                      "cpu_reference, cpu_blocked"));
  EXPECT_THAT(sweep.output, HasSubstr("; plugin backends of the registered "
                                      "workers: fake, numpy_reference"));
}

// A plugin backend times one MoE layer: a whole decode step naming it is
// refused before anything is recorded.
TEST_F(PluginsTest, APluginBackendIsRefusedForAWholeDecodeStep) {
  const fs::path spec = WriteSpec(dir_, {"numpy_reference"});
  std::string json = ReadText(spec);
  json.replace(json.find("MOE_LAYER"), 9, "DECODE_STEP");
  std::ofstream(spec) << json;
  const CommandResult sweep = Sweep(spec);
  EXPECT_EQ(sweep.exit_code, 2) << sweep.output;
  EXPECT_THAT(sweep.output,
              HasSubstr("workload.region: DECODE_STEP is not timed by "
                        "'numpy_reference'"));
}

// `moetune probe --plugins` probes the plugin backends as the worker does
// and shows what serves each, what it found and its bound.
TEST(PluginProbeTest, ProbeShowsPluginBackendsInTableAndJson) {
  const fs::path dir = TempDir("plugin-probe");
  const std::string probe = kBin + "/moetune probe --device cpu --plugins=" +
                            WritePluginFile(dir).string() +
                            " --model_library=" MOETUNE_MODEL_LIBRARY;
  const CommandResult table = RunCommand(probe);
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_THAT(table.output,
              HasSubstr("plugin backends:\n  numpy_reference: "
                        "plugin " +
                        kPython + " " + kSource +
                        "/worker/plugins/moetune_plugin_host.py"));
  EXPECT_THAT(table.output, HasSubstr("    versions: numpy 1."));
  EXPECT_THAT(table.output, HasSubstr("    error bound: 1e-04 (the "
                                      "reference's exact NVFP4 weights"));
  // The fake's probe claims 5; the worker caps it at 0.1.
  EXPECT_THAT(table.output, HasSubstr("  fake: plugin "));
  EXPECT_THAT(table.output, HasSubstr("    versions: fakelib 1.2\n"
                                      "    error bound: 0.1 (claims a lot)"));
  const CommandResult json =
      RunCommand("(" + probe + " --format json 2>/dev/null)");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  // One document: an array of probes, the CPU's first.
  google::protobuf::Value probes;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(json.output, &probes).ok())
      << json.output;
  ASSERT_EQ(probes.list_value().values_size(), 1) << json.output;
  std::string first;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(
                  probes.list_value().values(0), &first)
                  .ok());
  v1::Probe cpu;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(first, &cpu).ok());
  std::map<std::string, v1::BackendProbe> by_name;
  for (const v1::BackendProbe& b : cpu.backends()) by_name[b.name()] = b;
  const v1::BackendProbe& numpy = by_name["numpy_reference"];
  EXPECT_TRUE(numpy.available());
  EXPECT_THAT(numpy.plugin(), HasSubstr("moetune_plugin_host.py"));
  EXPECT_DOUBLE_EQ(numpy.error_bound(), 1e-4);
  ASSERT_EQ(numpy.versions_size(), 1);
  EXPECT_THAT(numpy.versions(0), ::testing::StartsWith("numpy 1."));
  EXPECT_EQ(by_name["fake"].tiles_size(), 1);
  EXPECT_TRUE(by_name["cpu_reference"].plugin().empty());
}

}  // namespace
}  // namespace moetune::e2e
