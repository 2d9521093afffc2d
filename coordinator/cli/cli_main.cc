// moetune: the command-line client. Subcommands in usage.cc; --coordinator
// ADDR talks to a running coordinator, otherwise an embedded one serves --db
// (and, for sweep, local workers: one per GPU, or one on the CPU).
#include <signal.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/command_line.h"
#include "common/log_flags.h"
#include "coordinator/cli/commands.h"
#include "coordinator/cli/usage.h"

ABSL_FLAG(std::string, coordinator, "",
          "coordinator host:port; empty = embedded coordinator on --db");
ABSL_FLAG(std::string, db, "moetune.db",
          "SQLite database (embedded mode); only sweep creates it");
ABSL_FLAG(std::string, spec, "", "sweep spec file (.json or .txtpb)");
ABSL_FLAG(std::string, format, "table",
          "output: table (to read), csv or json (raw numbers, for programs); "
          "compare also markdown");
ABSL_FLAG(int64_t, sweep, 0, "sweep id (0 = the latest sweep)");
ABSL_FLAG(bool, wide, false,
          "--format table: every column (default: the table keeps to 120 "
          "columns, leaving out the least important and cutting the reason)");
ABSL_FLAG(std::string, state, "", "results: only trials in this state");
ABSL_FLAG(std::string, backend, "", "results: only this backend");
ABSL_FLAG(std::string, workload, "", "results/best: only this workload hash");
ABSL_FLAG(int, limit, 0, "results: at most this many trials (0 = all)");
ABSL_FLAG(std::string, device, "all", "probe: cpu, a GPU ordinal, or all");
ABSL_FLAG(int, gpus, -1, "sweep: local GPU workers (-1 = one per GPU found)");
ABSL_FLAG(std::string, worker_binary, "",
          "sweep/probe: moetune-worker to run (default: beside this binary)");
ABSL_FLAG(std::string, token_file, "",
          "with --coordinator: file whose first line is the bearer token "
          "(default: the MOETUNE_TOKEN environment variable)");
ABSL_FLAG(std::string, tls_ca, "",
          "with --coordinator: CA (PEM) of the coordinator's certificate: TLS");
ABSL_FLAG(bool, samples, false,
          "results, sweep: include raw samples in --format json");
ABSL_FLAG(bool, keep_worker_logs, false,
          "sweep: keep the embedded workers' logs (kept anyway when the "
          "sweep fails)");
ABSL_FLAG(std::string, comm_calibration, "",
          "sweep: a moetune-comm-bench --calibration file, handed to every "
          "embedded worker (its --comm_calibration): measured latency and "
          "bandwidth replace the communication model's assumptions");
ABSL_FLAG(std::string, plugins, "",
          "probe: a plugin file (docs/plugins.md), handed to the worker "
          "(its --plugins): its out-of-process backends are probed too");
ABSL_FLAG(std::string, model_library, "",
          "probe: libmoetune_model.so for the plugins (the worker's "
          "--model_library; default: the worker's own default)");
ABSL_FLAG(int64_t, baseline, 0,
          "compare: the baseline sweep id (0 = the previous finished sweep "
          "of the same name)");
ABSL_FLAG(bool, across_builds, false,
          "compare: match results whose fingerprints differ only in the "
          "build hash (a new build against last night's); never across GPUs");
ABSL_FLAG(double, threshold, -1,
          "compare: exit 3 when a config is slower beyond noise by more than "
          "this many percent (0 = any regression beyond noise; -1 = never)");
ABSL_FLAG(std::string, markdown_out, "",
          "compare: also write the report as Markdown to this file");
ABSL_FLAG(std::string, json_out, "",
          "compare: also write the report as JSON to this file");
ABSL_FLAG(std::string, out, "-",
          "export: the file to write (- = standard output)");
ABSL_FLAG(int, context, 0,
          "export: only workloads of this context length (0 = any; needed "
          "when the sweep has several)");

namespace {

moetune::cli::CommandOptions OptionsFromFlags(const std::string& command) {
  moetune::cli::CommandOptions options;
  options.command = command;
  options.coordinator = absl::GetFlag(FLAGS_coordinator);
  options.db_path = absl::GetFlag(FLAGS_db);
  options.spec_path = absl::GetFlag(FLAGS_spec);
  options.sweep_id = absl::GetFlag(FLAGS_sweep);
  options.wide = absl::GetFlag(FLAGS_wide);
  options.state = absl::GetFlag(FLAGS_state);
  options.backend = absl::GetFlag(FLAGS_backend);
  options.workload_hash = absl::GetFlag(FLAGS_workload);
  options.limit = absl::GetFlag(FLAGS_limit);
  options.device = absl::GetFlag(FLAGS_device);
  options.gpus = absl::GetFlag(FLAGS_gpus);
  options.worker_binary = absl::GetFlag(FLAGS_worker_binary);
  options.token_file = absl::GetFlag(FLAGS_token_file);
  options.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  options.samples = absl::GetFlag(FLAGS_samples);
  options.keep_worker_logs = absl::GetFlag(FLAGS_keep_worker_logs);
  options.comm_calibration = absl::GetFlag(FLAGS_comm_calibration);
  options.plugins = absl::GetFlag(FLAGS_plugins);
  options.model_library = absl::GetFlag(FLAGS_model_library);
  options.baseline_sweep_id = absl::GetFlag(FLAGS_baseline);
  options.across_builds = absl::GetFlag(FLAGS_across_builds);
  options.threshold_pct = absl::GetFlag(FLAGS_threshold);
  options.markdown_out = absl::GetFlag(FLAGS_markdown_out);
  options.json_out = absl::GetFlag(FLAGS_json_out);
  options.out_path = absl::GetFlag(FLAGS_out);
  options.context = absl::GetFlag(FLAGS_context);
  return options;
}

// --help, `moetune help [COMMAND]` and `moetune COMMAND --help`: usage on
// stdout, exit 0 (2 for help on a command that does not exist).
int PrintHelp(const std::vector<std::string>& positional) {
  std::string command;
  if (!positional.empty()) command = positional[0];
  if (command == "help") command = positional.size() > 1 ? positional[1] : "";
  if (command.empty()) {
    std::cout << moetune::cli::GlobalUsage();
    return 0;
  }
  const auto usage = moetune::cli::CommandUsage(command);
  if (!usage.has_value()) {
    std::cerr << "moetune: unknown command '" << command
              << "'; allowed: " << moetune::cli::CommandNames() << "\n";
    return 2;
  }
  std::cout << *usage;
  return 0;
}

// Runs COMMAND once the command line is known to be well formed; `args` is
// argv with each flag's value joined to it (CommandLineCheck::args).
int RunParsed(const std::vector<std::string>& args,
              const std::string& command) {
  std::vector<char*> argv;
  for (const std::string& arg : args) {
    argv.push_back(const_cast<char*>(arg.c_str()));
  }
  absl::ParseCommandLine(static_cast<int>(argv.size()), argv.data());
  signal(SIGPIPE, SIG_IGN);
  // The embedded coordinator's chatter would drown the table (its trial
  // outcomes are in the progress lines already).
  if (const absl::Status logging =
          moetune::ApplyLogFlags(moetune::LogLevel::kError);
      !logging.ok()) {
    std::cerr << "moetune: " << logging.message() << "\n";
    return 2;
  }
  moetune::cli::CommandOptions options = OptionsFromFlags(command);
  if (!moetune::cli::ParseOutputFormat(absl::GetFlag(FLAGS_format),
                                       &options.format)) {
    std::cerr << "moetune: --format: '" << absl::GetFlag(FLAGS_format)
              << "' is not allowed; allowed: table, csv, json (compare: "
                 "also markdown)\n";
    return 2;
  }
  return moetune::cli::RunCommand(command, options);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("moetune COMMAND [flags]; moetune --help");
  const absl::StatusOr<moetune::CommandLineCheck> check =
      moetune::CheckCommandLine(argc, argv);
  if (!check.ok()) {
    std::cerr << "moetune: " << check.status().message()
              << "\nrun 'moetune --help' for the commands and flags\n";
    return 2;
  }
  if (check->version) {
    std::cout << moetune::VersionLine("moetune") << "\n";
    return 0;
  }
  const std::vector<std::string>& positional = check->positional;
  if (check->help || (!positional.empty() && positional[0] == "help")) {
    return PrintHelp(positional);
  }
  if (positional.size() != 1) {
    std::cerr << (positional.empty() ? "moetune: a command is required"
                                     : "moetune: one command at a time")
              << "\n\n"
              << moetune::cli::GlobalUsage();
    return 2;
  }
  return RunParsed(check->args, positional[0]);
}
