// moetune: the command-line client. Subcommands sweep, sweeps, cancel,
// results, best, workers, probe; --coordinator ADDR talks to a running
// coordinator, otherwise an embedded one serves --db (and, for sweep, local
// workers: one per GPU, or one on the CPU).
#include <signal.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "coordinator/cli/commands.h"

ABSL_FLAG(std::string, coordinator, "",
          "coordinator host:port; empty = embedded coordinator on --db");
ABSL_FLAG(std::string, db, "moetune.db", "SQLite database (embedded mode)");
ABSL_FLAG(std::string, spec, "", "sweep spec file (.json or .txtpb)");
ABSL_FLAG(std::string, format, "table", "output: table, csv or json");
ABSL_FLAG(int64_t, sweep, 0, "sweep id (0 = the latest sweep)");
ABSL_FLAG(std::string, state, "", "results: only trials in this state");
ABSL_FLAG(std::string, backend, "", "results: only this backend");
ABSL_FLAG(std::string, workload, "", "results/best: only this workload hash");
ABSL_FLAG(int, limit, 0, "results: at most this many trials (0 = all)");
ABSL_FLAG(std::string, device, "all", "probe: cpu, a GPU ordinal, or all");
ABSL_FLAG(int, gpus, -1, "sweep: local GPU workers (-1 = one per GPU found)");
ABSL_FLAG(std::string, worker_binary, "",
          "sweep: moetune-worker to start (default: beside this binary)");
ABSL_FLAG(std::string, token_file, "",
          "with --coordinator: file whose first line is the bearer token "
          "(default: the MOETUNE_TOKEN environment variable)");
ABSL_FLAG(std::string, tls_ca, "",
          "with --coordinator: CA (PEM) of the coordinator's certificate: TLS");
ABSL_FLAG(bool, samples, false,
          "results, sweep: include raw samples in --format json");

namespace {

constexpr char kUsage[] =
    "moetune <command> [flags]\n"
    "  sweep   --spec FILE [--coordinator ADDR] [--db PATH]   run a sweep\n"
    "  sweeps                                        list sweeps\n"
    "  cancel  --sweep N                             cancel a sweep\n"
    "  results [--sweep N] [--state S] [--backend B] [--workload H]\n"
    "  best    [--sweep N | --workload H]            the winner, explained\n"
    "  workers                                       workers and their probes\n"
    "  probe   [--device cpu|N|all]                  what this machine has\n"
    "common: --format table|csv|json, --coordinator ADDR, --db PATH";

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  if (args.size() != 2) {
    std::cerr << kUsage << "\n";
    return 2;
  }
  moetune::cli::CommandOptions options;
  options.coordinator = absl::GetFlag(FLAGS_coordinator);
  options.db_path = absl::GetFlag(FLAGS_db);
  options.spec_path = absl::GetFlag(FLAGS_spec);
  options.sweep_id = absl::GetFlag(FLAGS_sweep);
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
  if (!moetune::cli::ParseOutputFormat(absl::GetFlag(FLAGS_format),
                                       &options.format)) {
    std::cerr << "--format: '" << absl::GetFlag(FLAGS_format)
              << "' is not allowed; allowed: table, csv, json\n";
    return 2;
  }
  return moetune::cli::RunCommand(args[1], options);
}
