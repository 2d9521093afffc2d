// posix_spawn's argument vector from strings: what every place that starts
// a child process (the worker's trial processes, the CLI's local workers,
// the load bench's and the end-to-end tests' daemons) hands it.
#pragma once

#include <string>
#include <vector>

namespace moetune {

// Pointers into `args` (which must outlive the spawn), null-terminated.
inline std::vector<char*> SpawnArgv(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  return argv;
}

}  // namespace moetune
