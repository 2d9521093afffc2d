// Out-of-process backends end to end: the worker's plugin backend over real
// plugin processes (the Python plugin host and a misbehaving fake), judged
// by the TrialRunner as any backend is.
#include "worker/plugin_backend.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/tiny_moe_trial.h"
#include "worker/plugin_config.h"
#include "worker/trial_runner.h"

namespace moetune::worker {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

PluginOptions Options() {
  PluginOptions options;
  options.model_library = MOETUNE_MODEL_LIBRARY;
  options.setup_deadline = std::chrono::seconds(30);
  return options;
}

// The Python host serving `backend`.
std::unique_ptr<Backend> HostBackend(const std::string& backend) {
  std::vector<std::string> command = {MOETUNE_PYTHON, MOETUNE_PLUGIN_HOST};
  return MakePluginBackend({backend, command}, Options(),
                           MakeWarmPluginProcess(command));
}

// The fake plugin (tests/worker/plugins/fake_plugin.py) in `mode`.
std::unique_ptr<Backend> FakeBackend(const std::string& mode) {
  std::vector<std::string> command = {MOETUNE_PYTHON, MOETUNE_FAKE_PLUGIN,
                                      mode};
  return MakePluginBackend({"fake", command}, Options(),
                           MakeWarmPluginProcess(command));
}

v1::TrialExecution Execution(const std::string& backend, int batch = 3) {
  v1::TrialExecution execution =
      testing::TinyMoeTrial(7, backend, batch, /*seed=*/11);
  execution.mutable_trial()->mutable_measurement()->set_trial_timeout_s(20);
  return execution;
}

v1::TrialResult RunTrial(std::unique_ptr<Backend> backend,
                         const v1::TrialExecution& execution) {
  BackendRegistry registry;
  registry.Register(std::move(backend));
  TrialRunner runner(&registry);
  return runner.Run(execution);
}

TEST(PluginHostTest, NumpyReferenceRunsEndToEndAndIsDone) {
  const v1::TrialResult result =
      RunTrial(HostBackend("numpy_reference"), Execution("numpy_reference"));
  EXPECT_EQ(result.outcome(), v1::DONE) << result.reason();
  EXPECT_LT(result.max_rel_error(), 1e-6);
  EXPECT_DOUBLE_EQ(result.error_bound(), 1e-4);
  EXPECT_EQ(result.samples_us_size(), 3);
  EXPECT_GT(result.roofline().bytes(), 0);
}

TEST(PluginHostTest, NumpyReferenceRunsAShardOfTwoByTwo) {
  v1::TrialExecution execution = Execution("numpy_reference", 4);
  execution.mutable_trial()->mutable_config()->set_tp(2);
  execution.mutable_trial()->mutable_config()->set_ep(2);
  const v1::TrialResult result =
      RunTrial(HostBackend("numpy_reference"), execution);
  EXPECT_EQ(result.outcome(), v1::DONE) << result.reason();
}

TEST(PluginHostTest, ProbesSayWhatTheyFound) {
  std::unique_ptr<Backend> numpy = HostBackend("numpy_reference");
  const v1::BackendProbe cpu = numpy->Probe(DeviceTarget{-1});
  EXPECT_TRUE(cpu.available()) << cpu.reason();
  EXPECT_THAT(cpu.versions(), Contains(HasSubstr("numpy 1.")));
  EXPECT_THAT(cpu.plugin(), HasSubstr("moetune_plugin_host.py"));
  EXPECT_THAT(cpu.error_bound_why(), HasSubstr("float64"));
  EXPECT_FALSE(numpy->Probe(DeviceTarget{0}).available());
  // torch is absent on CI: the probe says so, whatever the device.
  const v1::BackendProbe bf16 =
      HostBackend("torch_grouped_bf16")->Probe(DeviceTarget{0});
  if (!bf16.available()) {
    EXPECT_THAT(bf16.reason(),
                ::testing::AnyOf(HasSubstr("torch"), HasSubstr("sm_")));
  }
}

TEST(PluginHostTest, UnknownBackendIsUnavailableNamingTheServedOnes) {
  const v1::BackendProbe probe =
      HostBackend("no_such_backend")->Probe(DeviceTarget{-1});
  EXPECT_FALSE(probe.available());
  EXPECT_THAT(probe.reason(), HasSubstr("numpy_reference"));
}

TEST(FakePluginTest, WrongValuesAreIncorrectNotFast) {
  const v1::TrialResult result =
      RunTrial(FakeBackend("zeros"), Execution("fake"));
  EXPECT_EQ(result.outcome(), v1::INCORRECT) << result.reason();
  // It claimed a bound of 5; the worker caps it.
  EXPECT_DOUBLE_EQ(result.error_bound(), kMaxPluginErrorBound);
}

TEST(FakePluginTest, ProbeCarriesVersionsTilesAndTheCappedBound) {
  const v1::BackendProbe probe = FakeBackend("zeros")->Probe(DeviceTarget{-1});
  EXPECT_TRUE(probe.available());
  EXPECT_THAT(probe.versions(), Contains("fakelib 1.2"));
  ASSERT_EQ(probe.tiles_size(), 1);
  EXPECT_EQ(probe.tiles(0).block_k(), 64);
  EXPECT_DOUBLE_EQ(probe.error_bound(), kMaxPluginErrorBound);
}

TEST(FakePluginTest, ATileItDoesNotOfferFails) {
  v1::TrialExecution execution = Execution("fake");
  execution.mutable_trial()->mutable_config()->mutable_tile()->set_block_n(16);
  execution.mutable_trial()->mutable_config()->mutable_tile()->set_block_k(64);
  const v1::TrialResult result = RunTrial(FakeBackend("zeros"), execution);
  EXPECT_EQ(result.outcome(), v1::FAILED);
  EXPECT_THAT(result.reason(), HasSubstr("8x64"));
}

struct Misbehaviour {
  const char* mode;
  const char* reason;
};

class MisbehavingPluginTest : public ::testing::TestWithParam<Misbehaviour> {};

// Each costs one trial, FAILED with its reason; the backend (and so the
// worker) goes on: the same backend object runs the next trial.
TEST_P(MisbehavingPluginTest, CostsOneTrialNeverTheWorker) {
  v1::TrialExecution execution = Execution("fake");
  execution.mutable_trial()->mutable_measurement()->set_trial_timeout_s(4);
  BackendRegistry registry;
  registry.Register(FakeBackend(GetParam().mode));
  TrialRunner runner(&registry);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const v1::TrialResult result = runner.Run(execution);
    EXPECT_EQ(result.outcome(), v1::FAILED) << result.reason();
    EXPECT_THAT(result.reason(), HasSubstr(GetParam().reason));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, MisbehavingPluginTest,
    ::testing::Values(Misbehaviour{"crash", "crashed: killed by signal 6"},
                      Misbehaviour{"hang", "hung"},
                      Misbehaviour{"garbage", "sent garbage"},
                      Misbehaviour{"not_json", "not a PluginReply in JSON"},
                      Misbehaviour{"bad_version", "protocol version 99"},
                      Misbehaviour{"wrong_shape", "shape [3, 255]"},
                      Misbehaviour{"unavailable", "not installed: fakelib"}),
    [](const auto& info) { return std::string(info.param.mode); });

TEST(PluginConfigTest, ReadsEntries) {
  const auto specs = ParsePluginList(
      R"({"plugins": [{"backend": "torch_grouped_bf16",
                       "command": ["/bin/sh", "-c", "true"]}]})");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ((*specs)[0].backend, "torch_grouped_bf16");
  EXPECT_EQ((*specs)[0].command.size(), 3u);
}

// deploy/plugins.json names the host by its place in a bundle: a relative
// command[0] is taken relative to the plugin file's directory.
TEST(PluginConfigTest, RelativeCommandsAreUnderThePluginFilesDirectory) {
  const std::string json =
      R"({"plugins": [{"backend": "a", "command": ["sh", "-c", "true"]}]})";
  const auto specs = ParsePluginList(json, "/bin");
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_EQ((*specs)[0].command[0], "/bin/sh");
  EXPECT_EQ((*specs)[0].command[1], "-c");
  EXPECT_THAT(ParsePluginList(json, "/no/such/dir").status().message(),
              HasSubstr("plugins[0].command[0]: '/no/such/dir/sh' is not an "
                        "executable file; allowed: the path of one (absolute, "
                        "or relative to '/no/such/dir')"));
}

TEST(PluginConfigTest, RefusalsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"plugins": [{"backend": "Bad-Name", "command": ["/bin/sh"]}]})",
       "plugins[0].backend: 'Bad-Name' is not allowed; allowed:"},
      {R"({"plugins": [{"backend": "fused_gemv", "command": ["/bin/sh"]}]})",
       "plugins[0].backend: 'fused_gemv' is a native backend"},
      {R"({"plugins": [{"backend": "a", "command": ["/bin/sh"]},
                       {"backend": "a", "command": ["/bin/sh"]}]})",
       "plugins[1].backend: 'a' is listed twice"},
      {R"({"plugins": [{"backend": "a", "command": []}]})",
       "plugins[0].command: must not be empty"},
      {R"({"plugins": [{"backend": "a", "command": ["/no/such/file"]}]})",
       "plugins[0].command[0]: '/no/such/file' is not an executable"},
      {R"({"plugins": [{"backend": "a", "comand": ["/bin/sh"]}]})",
       "plugins: not a PluginList"},
      {R"({"plugins": [,]})", "plugins: not JSON"},
  };
  for (const auto& [json, message] : cases) {
    const auto specs = ParsePluginList(json);
    EXPECT_FALSE(specs.ok()) << json;
    EXPECT_THAT(specs.status().message(), HasSubstr(message)) << json;
  }
}

}  // namespace
}  // namespace moetune::worker
