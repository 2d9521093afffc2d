// Which backends a worker runs out of process: its plugin file
// (moetune-worker --plugins=FILE; proto/plugin.proto PluginList in JSON,
// docs/plugins.md), read and checked, and the registration of one plugin
// backend per entry. Pure functions but for the file reads; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/backend.h"
#include "worker/plugin_backend.h"

namespace moetune::worker {

// The entries of a plugin file's text. INVALID_ARGUMENT naming the field
// (plugins[1].backend, plugins[0].command[0]) and what is allowed: JSON
// that is not a PluginList, a backend name that is empty, not lower case /
// digits / '_', a native backend's or listed twice, an empty command, or a
// command[0] that is not an executable file. A relative command[0] is
// taken relative to `base_dir` when one is given (and the spec holds that
// path), else to the working directory.
absl::StatusOr<std::vector<PluginSpec>> ParsePluginList(
    const std::string& json, const std::string& base_dir = "");

// ParsePluginList of the file at `path` (NOT_FOUND when it cannot be read),
// a relative command[0] taken relative to the file's directory: a plugin
// file beside a bundle names its plugins by their place in the bundle.
absl::StatusOr<std::vector<PluginSpec>> LoadPluginList(const std::string& path);

// One plugin backend per spec, each with its own warm plugin process.
void RegisterPlugins(const std::vector<PluginSpec>& specs,
                     const PluginOptions& options, BackendRegistry* registry);

// Where libmoetune_model.so is beside a bundle or a build: the directory of
// this process's binary (a bundle, deploy/bundle.sh), else lib/ next to it
// (build/bin -> build/lib); the former when neither has it, so that the
// error names the bundle's place.
std::string DefaultModelLibrary();

}  // namespace moetune::worker
