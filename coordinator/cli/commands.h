// The CLI's subcommands over the public gRPC API (remote, or an embedded
// coordinator). Each returns the process exit code (docs/cli.md, "Exit
// codes"): 0 ok, 1 nothing succeeded or nothing found, 2 bad usage or a
// rejected spec, 3 `compare` found a regression beyond --threshold, 130
// interrupted.
#pragma once

#include <cstdint>
#include <string>

#include "coordinator/cli/table.h"

namespace moetune::cli {

struct CommandOptions {
  std::string command;  // the subcommand, for messages
  std::string coordinator;
  std::string db_path;
  std::string spec_path;
  OutputFormat format = OutputFormat::kTable;
  bool wide = false;  // --format table: every column, not 120 wide
  int64_t sweep_id = 0;
  std::string state;
  std::string backend;
  std::string workload_hash;
  int limit = 0;
  std::string device;
  int gpus = -1;
  std::string worker_binary;
  std::string token_file;  // remote: the bearer token's file (or MOETUNE_TOKEN)
  std::string tls_ca;      // remote: the CA of the coordinator's certificate
  bool samples = false;    // results/sweep --format json: raw samples too
  bool keep_worker_logs = false;  // sweep: keep the embedded workers' logs
  // sweep: each embedded worker's --comm_calibration (empty: none)
  std::string comm_calibration;
  // probe: the worker's --plugins and --model_library (empty: none, and
  // the worker's default library)
  std::string plugins;
  std::string model_library;
  // compare
  int64_t baseline_sweep_id = 0;  // 0: the previous sweep of the same name
  bool across_builds = false;     // match fingerprints without build hashes
  double threshold_pct = -1;      // < 0: never fail on a regression
  std::string markdown_out;       // also write the report as Markdown here
  std::string json_out;           // also write the report as JSON here
  // export
  std::string out_path;  // the winners file ("-" = stdout)
  int context = 0;       // only workloads of this context length (0 = any)
};

int RunCommand(const std::string& command, const CommandOptions& options);

// `moetune sweep` (sweep_command.cc).
int CmdSweep(const CommandOptions& options);
// `moetune compare` (compare_command.cc).
int CmdCompare(const CommandOptions& options);
// `moetune export` (export_command.cc).
int CmdExport(const CommandOptions& options);

}  // namespace moetune::cli
