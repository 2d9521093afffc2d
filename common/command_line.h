// What every moetune binary does with its command line before abseil parses
// it. abseil 20220623 exits 1 on --help (and, filtering flags by the name of
// the main file, often prints only "No flags matched"), exits 1 on an unknown
// flag, and has no version of ours. So: --help/-h asks for the binary's own
// usage (exit 0), --version for the version and build hash (exit 0), and an
// unknown flag or a value its type refuses is a usage error (exit 2) naming
// the flag. Reads the global flag registry; call from main only.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace moetune {

struct CommandLineCheck {
  std::vector<std::string> positional;  // arguments that are not flags
  // argv as abseil should parse it: a non-boolean flag given as "--name
  // value" becomes "--name=value", so that a value starting with '-' (such
  // as "--out -", standard output) is taken without abseil's "Did you really
  // mean..." warning.
  std::vector<std::string> args;
  bool help = false;
  bool version = false;
};

// Checks argv[1..] against the registered flags without setting any.
// InvalidArgument names the first unknown flag or bad value.
absl::StatusOr<CommandLineCheck> CheckCommandLine(int argc,
                                                  const char* const* argv);

// "  --name=DEFAULT\n      help" for each flag, in the order given; a flag
// named in `help` gets that text instead of its own (a command that reads
// the flag differently from the others).
std::string DescribeFlags(const std::vector<std::string>& names,
                          const std::map<std::string, std::string>& help = {});

// "<program> <version> (build <git describe>)".
std::string VersionLine(const std::string& program);

// The standard front door of a binary: handles --help (printing `usage`,
// which should include DescribeFlags), --version and refused flags (exit 2
// with a pointer to --help) and returns -1 when the program should go on to
// absl::ParseCommandLine; otherwise the exit code.
int HandleCommandLine(int argc, char** argv, const std::string& program,
                      const std::string& usage);

}  // namespace moetune
