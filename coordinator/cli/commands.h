// The CLI's subcommands over the public gRPC API (remote, or an embedded
// coordinator). Each returns the process exit code: 0 ok, 1 no successful
// trial / not found, 2 bad usage or input.
#pragma once

#include <cstdint>
#include <string>

#include "coordinator/cli/table.h"

namespace moetune::cli {

struct CommandOptions {
  std::string coordinator;
  std::string db_path;
  std::string spec_path;
  OutputFormat format = OutputFormat::kTable;
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
};

int RunCommand(const std::string& command, const CommandOptions& options);

// `moetune sweep` (sweep_command.cc).
int CmdSweep(const CommandOptions& options);

}  // namespace moetune::cli
