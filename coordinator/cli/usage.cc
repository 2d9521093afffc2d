#include "coordinator/cli/usage.h"

#include "absl/strings/str_cat.h"
#include "common/command_line.h"

namespace moetune::cli {
namespace {

const std::vector<std::string> kCommonFlags = {
    "coordinator", "db",         "token_file",   "tls_ca",
    "log_level",   "log_format", "worker_binary"};

constexpr char kExitQuery[] =
    "0 something listed, 1 nothing found (or unreachable), 2 bad usage";

std::vector<CommandHelp> MakeCommands() {
  return {
      {"sweep",
       "sweep --spec FILE [--gpus N] [--format F]",
       "Submits the sweep, shows its progress on stderr (redrawn in place on "
       "a terminal), then prints every trial and the winner per workload. "
       "--format json prints {sweep, results, best}; csv the trials only.",
       {"spec", "format", "gpus", "samples", "keep_worker_logs",
        "comm_calibration"},
       "0 at least one trial DONE, 1 none succeeded, or every embedded "
       "worker exited before the end (the sweep is cancelled), 2 bad usage "
       "or rejected spec, 130 interrupted (the sweep is cancelled)"},
      {"sweeps",
       "sweeps [--format F]",
       "Lists the sweeps, newest first.",
       {"format"},
       kExitQuery},
      {"cancel",
       "cancel --sweep N",
       "Cancels a running sweep.",
       {"sweep"},
       "0 cancelled, 1 no such sweep, 2 bad usage"},
      {"results",
       "results [--sweep N] [--state S] [--backend B] [--workload H]",
       "Lists trials with their statistics, floor and efficiency.",
       {"sweep", "state", "backend", "workload", "limit", "format", "samples"},
       kExitQuery},
      {"best",
       "best [--sweep N | --workload H] [--format F]",
       "The winner per workload and device, with runner-up, margin, ties and "
       "the rule that decided (latest sweep by default).",
       {"sweep", "workload", "format"},
       "0 a winner found, 1 none (nothing succeeded), 2 bad usage"},
      {"compare",
       "compare [--sweep N] [--baseline M] [--across_builds] [--threshold "
       "PCT]",
       "A regression report: each workload and config of sweep N (default "
       "the latest) against the baseline (default the previous sweep of the "
       "same name): both medians with their intervals, the change, and "
       "faster / slower / same within noise. Never across GPUs.",
       {"sweep", "baseline", "across_builds", "threshold", "format",
        "markdown_out", "json_out"},
       "0 compared, no regression beyond --threshold, 1 nothing to compare, "
       "2 bad usage, 3 a regression beyond --threshold"},
      {"export",
       "export [--sweep N] [--out FILE] [--context C]",
       "Writes the winning configuration per batch size as a JSON file a "
       "serving launcher can load.",
       {"sweep", "out", "context"},
       "0 written, 1 no winner to export, 2 bad usage"},
      {"workers",
       "workers [--format F]",
       "Workers and their probes.",
       {"format"},
       kExitQuery},
      {"probe",
       "probe [--device cpu|N|all] [--plugins FILE] [--format F]",
       "What this machine has: devices, measured bandwidth, each backend "
       "available or not with the reason; with --plugins, its plugin "
       "backends too, with their command, versions and error bound.",
       {"device", "format", "plugins", "model_library"},
       "0 probed, 1 the probe failed, 2 bad usage"},
  };
}

}  // namespace

const std::vector<CommandHelp>& AllCommands() {
  static const std::vector<CommandHelp>* commands =
      new std::vector<CommandHelp>(MakeCommands());
  return *commands;
}

std::string CommandNames() {
  std::string names;
  for (const CommandHelp& c : AllCommands()) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", c.name);
  }
  return names;
}

std::string GlobalUsage() {
  std::string text =
      "moetune: sweeps, results and winners of the MoE decode autotuner.\n"
      "Without --coordinator an embedded coordinator serves --db.\n\n"
      "usage: moetune COMMAND [flags]   (moetune COMMAND --help for more)\n\n"
      "commands:\n";
  for (const CommandHelp& c : AllCommands()) {
    absl::StrAppend(&text, "  ", c.synopsis, "\n");
  }
  absl::StrAppend(&text, "\ncommon flags:\n", DescribeFlags(kCommonFlags),
                  "  --help, --version\n\nexit codes: 0 ok, 1 nothing "
                  "succeeded or nothing found, 2 bad usage or a rejected "
                  "spec, 3 compare: a regression beyond --threshold, 130 "
                  "interrupted\n");
  return text;
}

std::optional<std::string> CommandUsage(const std::string& command) {
  for (const CommandHelp& c : AllCommands()) {
    if (c.name != command) continue;
    return absl::StrCat("usage: moetune ", c.synopsis, "\n\n", c.description,
                        "\n\nflags:\n", DescribeFlags(c.flags),
                        "\ncommon flags:\n", DescribeFlags(kCommonFlags),
                        "\nexit: ", c.exit_codes, "\n");
  }
  return std::nullopt;
}

}  // namespace moetune::cli
