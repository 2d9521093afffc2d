// The CLI's help: one entry per subcommand (synopsis, what it does, its
// flags, its exit codes), the global usage built from them. Flag help text
// comes from the flags' own definitions (cli_main.cc), so it cannot drift.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace moetune::cli {

struct CommandHelp {
  std::string name;
  std::string synopsis;     // "sweep --spec FILE [flags]"
  std::string description;  // one paragraph
  std::vector<std::string> flags;
  // The shared flags this command reads (the database or coordinator it
  // asks, its logs, the worker it runs): only these are in its help.
  std::vector<std::string> common_flags;
  // Flags this command reads differently from the others: their help text
  // here replaces the flag's own.
  std::map<std::string, std::string> flag_help;
  std::string exit_codes;
};

const std::vector<CommandHelp>& AllCommands();
// "sweep, sweeps, ..." for error messages.
std::string CommandNames();
// `moetune --help`: every command in a line, the flags every command but
// probe reads, exit codes.
std::string GlobalUsage();
// `moetune COMMAND --help`; nullopt for an unknown command.
std::optional<std::string> CommandUsage(const std::string& command);

}  // namespace moetune::cli
