// moetune-worker: one per GPU (or one CPU worker). Probes, registers with the
// coordinator, and runs trials in supervised child processes. The same binary
// is the child: `moetune-worker --run_trial` reads a TrialExecution on stdin;
// `--serve_trials` (the default, warm) serves them framed, one after another.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/build_info.h"
#include "common/comm/comm_calibration.h"
#include "common/command_line.h"
#include "common/log.h"
#include "common/log_flags.h"
#include "common/process.h"
#include "common/rpc/channel.h"
#include "google/protobuf/util/json_util.h"
#include "worker/agent.h"
#include "worker/grpc_gang_rendezvous.h"
#include "worker/plugin_config.h"
#include "worker/probe.h"

ABSL_FLAG(std::string, coordinator, "127.0.0.1:50052",
          "the coordinator's worker address host:port (its --worker_listen)");
ABSL_FLAG(std::string, token_file, "",
          "file whose first line is this worker's bearer token (role "
          "worker); default: the MOETUNE_TOKEN environment variable");
ABSL_FLAG(std::string, tls_ca, "",
          "CA (PEM) to check the coordinator's certificate: TLS");
ABSL_FLAG(std::string, tls_cert, "", "client certificate (PEM), mutual TLS");
ABSL_FLAG(std::string, tls_key, "", "client private key (PEM)");
ABSL_FLAG(int, report_retry_s, 60,
          "how long a result the coordinator cannot record is offered again "
          "before the worker gives it up (the trial is then re-queued)");
ABSL_FLAG(int, parent_pid, 0,
          "exit when this process (the one that started the worker) dies");
ABSL_FLAG(std::string, device, "cpu",
          "cpu, or a CUDA device ordinal (0, 1, ...)");
ABSL_FLAG(std::string, name, "", "worker name; default host:device");
ABSL_FLAG(std::string, comm_calibration, "",
          "a CommCalibration file (moetune-comm-bench --calibration): "
          "measured parameters of the communication model");
ABSL_FLAG(int, max_trials, 0, "exit after this many trials (0 = never)");
ABSL_FLAG(bool, probe_only, false, "print the probe as JSON and exit");
ABSL_FLAG(bool, count_gpus, false,
          "print the number of CUDA devices this build sees and exit");
ABSL_FLAG(std::string, trial_wrapper, "",
          "command prefix for each trial process, e.g. 'compute-sanitizer "
          "--tool memcheck' (split on spaces)");
ABSL_FLAG(std::string, plugins, "",
          "a JSON file naming out-of-process backends and the commands "
          "that serve them (docs/plugins.md); empty: none");
ABSL_FLAG(std::string, model_library, "",
          "libmoetune_model.so, which plugins load to make their inputs; "
          "default: lib/ beside this binary's directory, or that directory");
ABSL_FLAG(bool, run_trial, false,
          "internal: run one trial from stdin (the supervised child)");
ABSL_FLAG(bool, serve_trials, false,
          "internal: serve trials framed on stdin (the warm supervised child)");
ABSL_FLAG(bool, warm_trials, true,
          "keep the trial process warm between trials of one workload (its "
          "CUDA context, weights and caches made once); it is replaced when "
          "the workload changes and after any trial that is not DONE. "
          "--nowarm_trials starts a process for every trial");

namespace moetune::worker {
namespace {

std::atomic<WorkerAgent*> g_agent{nullptr};

void OnSignal(int) {
  WorkerAgent* agent = g_agent.load();
  if (agent != nullptr) agent->Stop();
}

// -1 for "cpu", else the ordinal; an error names the flag and allowed values.
absl::StatusOr<int> ParseDevice(const std::string& device) {
  if (device == "cpu") return -1;
  int ordinal = -1;
  if (absl::SimpleAtoi(device, &ordinal) && ordinal >= 0) return ordinal;
  return absl::InvalidArgumentError(absl::StrCat(
      "--device: '", device, "' is not allowed; allowed: cpu or 0, 1, 2, ..."));
}

// The child command: this binary in `mode` (--run_trial or --serve_trials),
// behind an optional wrapper (a sanitizer, a profiler, or a test's fault
// injector).
std::vector<std::string> TrialCommand(const std::string& wrapper,
                                      const std::string& device,
                                      const std::string& mode) {
  std::vector<std::string> command;
  for (absl::string_view part :
       absl::StrSplit(wrapper, ' ', absl::SkipEmpty())) {
    command.emplace_back(part);
  }
  // The wrapper needs a real path: /proc/self/exe would name the wrapper.
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  command.push_back(n > 0 ? std::string(self, n) : "/proc/self/exe");
  command.push_back(mode);
  command.push_back(absl::StrCat("--device=", device));
  // A trial process dies with its worker (a killed worker must not leave a
  // kernel running on its GPU), behind a wrapper too.
  command.push_back(absl::StrCat("--parent_pid=", getpid()));
  // The trial process serves the worker's plugin backends too; a gang
  // trial's process calls the coordinator (its rendezvous) with the
  // worker's own credentials: the files, never the secrets, on its line.
  for (const auto& [flag, value] :
       {std::pair{"plugins", absl::GetFlag(FLAGS_plugins)},
        std::pair{"model_library", absl::GetFlag(FLAGS_model_library)},
        std::pair{"tls_ca", absl::GetFlag(FLAGS_tls_ca)},
        std::pair{"tls_cert", absl::GetFlag(FLAGS_tls_cert)},
        std::pair{"tls_key", absl::GetFlag(FLAGS_tls_key)},
        std::pair{"token_file", absl::GetFlag(FLAGS_token_file)}}) {
    if (!value.empty()) command.push_back(absl::StrCat("--", flag, "=", value));
  }
  return command;
}

int PrintProbe(const v1::Probe& probe) {
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = true;
  (void)google::protobuf::util::MessageToJsonString(probe, &json, print);
  std::cout << json;
  return 0;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> CoordinatorChannel(
    const std::string& address) {
  rpc::ChannelOptions channel;
  channel.tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  channel.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  channel.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  absl::StatusOr<std::string> token =
      rpc::ReadToken(absl::GetFlag(FLAGS_token_file));
  if (!token.ok()) return token.status();
  channel.token = *token;
  return rpc::MakeChannel(address, channel);
}

// In a trial process: a gang trial's rendezvous at the coordinator its
// worker named, over a channel made like the worker's.
absl::StatusOr<std::unique_ptr<GangRendezvous>> GrpcRendezvousFor(
    const v1::TrialExecution& execution) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      CoordinatorChannel(execution.coordinator_address());
  if (!channel.ok()) return channel.status();
  return std::make_unique<GrpcGangRendezvous>(*channel, execution);
}

// Registers with the coordinator and runs trials until a signal stops it.
int ServeTrials(int ordinal, const v1::Probe& probe, SystemInfo& system) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      CoordinatorChannel(absl::GetFlag(FLAGS_coordinator));
  if (!channel.ok()) {
    LogError("worker: ", channel.status().message());
    return 2;
  }
  std::string name = absl::GetFlag(FLAGS_name);
  if (name.empty())
    name = absl::StrCat(system.HostName(), ":", absl::GetFlag(FLAGS_device));
  const std::string wrapper = absl::GetFlag(FLAGS_trial_wrapper);
  const std::string device = absl::GetFlag(FLAGS_device);
  std::unique_ptr<TrialExecutor> executor;
  if (absl::GetFlag(FLAGS_warm_trials)) {
    executor = std::make_unique<WarmProcessExecutor>(
        TrialCommand(wrapper, device, "--serve_trials"),
        TrialCommand(wrapper, device, "--run_trial"));
  } else {
    executor = std::make_unique<ChildProcessExecutor>(
        TrialCommand(wrapper, device, "--run_trial"));
  }
  AgentOptions options;
  options.name = name;
  options.device_ordinal = ordinal;
  options.max_trials = absl::GetFlag(FLAGS_max_trials);
  options.report_retry_ms = absl::GetFlag(FLAGS_report_retry_s) * 1000;
  options.coordinator_address = absl::GetFlag(FLAGS_coordinator);
  if (!absl::GetFlag(FLAGS_comm_calibration).empty()) {
    absl::StatusOr<v1::CommCalibration> calibration =
        comm::LoadCommCalibration(absl::GetFlag(FLAGS_comm_calibration));
    if (!calibration.ok()) {
      LogError("worker: ", calibration.status().message());
      return 2;
    }
    options.comm_calibration = *std::move(calibration);
  }
  WorkerAgent agent(*channel, options, probe, executor.get());
  g_agent = &agent;
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  const absl::Status status = agent.Run();
  g_agent = nullptr;
  if (!status.ok()) LogError("worker: ", status.ToString());
  return status.ok() ? 0 : 1;
}

// The plugin file's backends (--plugins), each served by its own plugin
// process.
absl::Status AddPlugins(BackendRegistry* registry) {
  const std::string path = absl::GetFlag(FLAGS_plugins);
  if (path.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<PluginSpec>> specs = LoadPluginList(path);
  if (!specs.ok()) return specs.status();
  PluginOptions options;
  options.model_library = absl::GetFlag(FLAGS_model_library);
  if (options.model_library.empty()) {
    options.model_library = DefaultModelLibrary();
  }
  options.worker_version = BuildHash();
  RegisterPlugins(*specs, options, registry);
  return absl::OkStatus();
}

int WorkerMain(int ordinal) {
  RealClock* clock = RealClock::Get();
  RealGpuApi gpu;
  if (absl::GetFlag(FLAGS_count_gpus)) {
    std::cout << gpu.DeviceCount() << "\n";
    return 0;
  }
  RealSystemInfo system;
  BackendRegistry registry = MakeDefaultRegistry(clock, &gpu);
  if (const absl::Status plugins = AddPlugins(&registry); !plugins.ok()) {
    LogError("worker: ", plugins.message());
    return 2;
  }
  TrialRunner runner(&registry, GrpcRendezvousFor);
  if (absl::GetFlag(FLAGS_run_trial)) return RunTrialChildMain(&runner);
  if (absl::GetFlag(FLAGS_serve_trials)) return RunTrialServeMain(&runner);
  const v1::Probe probe =
      ProbeWorker(DeviceTarget{ordinal}, registry, {&system, &gpu, clock});
  if (absl::GetFlag(FLAGS_probe_only)) return PrintProbe(probe);
  return ServeTrials(ordinal, probe, system);
}

std::string Usage() {
  return absl::StrCat(
      "moetune-worker: one per GPU (or one CPU worker); probes, registers "
      "with the coordinator and runs trials in supervised child "
      "processes.\n\nusage: moetune-worker --coordinator HOST:PORT "
      "--device cpu|N [flags]\n\nflags:\n",
      DescribeFlags({"coordinator", "device", "name", "token_file", "tls_ca",
                     "tls_cert", "tls_key", "report_retry_s", "trial_wrapper",
                     "warm_trials", "comm_calibration", "plugins",
                     "model_library", "max_trials", "probe_only", "count_gpus",
                     "parent_pid", "log_level", "log_format"}),
      "  --help, --version\n\nexit: 0 stopped, 1 failed, 2 bad flag\n");
}

}  // namespace
}  // namespace moetune::worker

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "moetune-worker --coordinator HOST:PORT --device cpu|N");
  const int handled = moetune::HandleCommandLine(argc, argv, "moetune-worker",
                                                 moetune::worker::Usage());
  if (handled >= 0) return handled;
  absl::ParseCommandLine(argc, argv);
  if (const absl::Status logging =
          moetune::ApplyLogFlags(moetune::LogLevel::kInfo);
      !logging.ok()) {
    std::cerr << "moetune-worker: " << logging.message() << "\n";
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  // A trial process is killed with its worker; a worker started by the CLI
  // is asked to stop (it reports what it can) when the CLI dies.
  const bool trial_child =
      absl::GetFlag(FLAGS_run_trial) || absl::GetFlag(FLAGS_serve_trials);
  const int with_parent = trial_child ? SIGKILL : SIGTERM;
  if (absl::GetFlag(FLAGS_parent_pid) != 0 &&
      !moetune::DieWithAncestor(absl::GetFlag(FLAGS_parent_pid), with_parent)) {
    return 1;  // the parent is already gone
  }
  absl::StatusOr<int> ordinal =
      moetune::worker::ParseDevice(absl::GetFlag(FLAGS_device));
  if (!ordinal.ok()) {
    std::cerr << ordinal.status().message() << "\n";
    return 2;
  }
  return moetune::worker::WorkerMain(*ordinal);
}
