#include "coordinator/cli/usage.h"

#include "absl/strings/str_cat.h"
#include "common/command_line.h"

namespace moetune::cli {
namespace {

// The database or coordinator a command asks, and its logs: every command
// but probe, which asks nothing but its own worker binary.
const std::vector<std::string> kSessionFlags = {
    "coordinator", "db", "token_file", "tls_ca", "log_level", "log_format"};

std::vector<std::string> SessionFlagsAnd(const std::string& extra) {
  std::vector<std::string> flags = kSessionFlags;
  flags.push_back(extra);
  return flags;
}

constexpr char kExitQuery[] =
    "0 something listed, 1 nothing found (or unreachable), 2 bad usage";

// sweep, sweeps, cancel, results: the commands that run or list trials.
std::vector<CommandHelp> TrialCommands() {
  return {
      {"sweep",
       "sweep --spec FILE [--gpus N] [--format F] [--wide]",
       "Submits the sweep, shows its progress on stderr (redrawn in place on "
       "a terminal), then prints every trial and the winner per workload. "
       "--format json prints {sweep, results, best}; csv the trials only.",
       {"spec", "format", "wide", "gpus", "samples", "keep_worker_logs",
        "comm_calibration"},
       SessionFlagsAnd("worker_binary"),
       {},
       "0 at least one trial DONE, 1 none succeeded, or every embedded "
       "worker exited before the end (the sweep is cancelled), 2 bad usage "
       "or rejected spec, 130 interrupted (the sweep is cancelled)"},
      {"sweeps",
       "sweeps [--format F]",
       "Lists the sweeps, newest first.",
       {"format"},
       kSessionFlags,
       {},
       kExitQuery},
      {"cancel",
       "cancel --sweep N",
       "Cancels a running sweep: its queued trials at once, the running ones "
       "at their next heartbeat.",
       {"sweep"},
       kSessionFlags,
       {{"sweep",
         "the sweep to cancel (required: cancel never picks the latest "
         "sweep, which may be one somebody else just started; moetune "
         "sweeps lists them)"}},
       "0 cancelled, 1 no such sweep, 2 bad usage (no --sweep)"},
      {"results",
       "results [--sweep N] [--state S] [--backend B] [--workload H] [--wide]",
       "Lists trials with their statistics, floor and efficiency.",
       {"sweep", "state", "backend", "workload", "limit", "format", "wide",
        "samples"},
       kSessionFlags,
       {},
       kExitQuery},
  };
}

// best, compare, export, workers, probe: winners, reports and machines.
std::vector<CommandHelp> ReportCommands() {
  return {
      {"best",
       "best [--sweep N | --workload H] [--format F]",
       "The winner per workload and device, with runner-up, margin, ties and "
       "the rule that decided (latest sweep by default).",
       {"sweep", "workload", "format"},
       kSessionFlags,
       {},
       "0 a winner found, 1 none (nothing succeeded), 2 bad usage"},
      {"compare",
       "compare [--sweep N] [--baseline M] [--across_builds] [--threshold "
       "PCT] [--wide]",
       "A regression report: each workload and config of sweep N (default "
       "the latest) against the baseline (default the previous sweep of the "
       "same name): both medians with their intervals, the change, and "
       "faster / slower / same within noise. Never across GPUs.",
       {"sweep", "baseline", "across_builds", "threshold", "format", "wide",
        "markdown_out", "json_out"},
       kSessionFlags,
       {},
       "0 compared, no regression beyond --threshold, 1 nothing to compare, "
       "2 bad usage, 3 a regression beyond --threshold"},
      {"export",
       "export [--sweep N] [--out FILE|-] [--context C]",
       "Writes the winning configuration per batch size as a JSON file a "
       "serving launcher can load.",
       {"sweep", "out", "context", "format"},
       kSessionFlags,
       {{"format",
         "json (table, the default, means json here too); csv and markdown "
         "are refused: for the winners as CSV, moetune best --format csv"}},
       "0 written, 1 no winner to export, 2 bad usage"},
      {"workers",
       "workers [--format F]",
       "Workers and their probes.",
       {"format"},
       kSessionFlags,
       {},
       kExitQuery},
      {"probe",
       "probe [--device cpu|N|all] [--plugins FILE] [--format F]",
       "What this machine has: devices, measured bandwidth, each backend "
       "available or not with the reason; with --plugins, its plugin "
       "backends too, with their command, versions and error bound.",
       {"device", "format", "plugins", "model_library"},
       {"worker_binary"},
       {},
       "0 probed, 1 the probe failed, 2 bad usage"},
  };
}

std::vector<CommandHelp> MakeCommands() {
  std::vector<CommandHelp> commands = TrialCommands();
  for (CommandHelp& c : ReportCommands()) commands.push_back(std::move(c));
  return commands;
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
  absl::StrAppend(&text, "\nflags of every command but probe:\n",
                  DescribeFlags(kSessionFlags),
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
                        "\n\nflags:\n", DescribeFlags(c.flags, c.flag_help),
                        DescribeFlags(c.common_flags),
                        "  --help, --version\n\nexit: ", c.exit_codes, "\n");
  }
  return std::nullopt;
}

}  // namespace moetune::cli
