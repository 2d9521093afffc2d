#include "worker/plugin_config.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/strict_json.h"
#include "google/protobuf/util/json_util.h"
#include "kernels/backends/registry.h"
#include "proto/plugin.pb.h"

namespace moetune::worker {
namespace {

constexpr size_t kMaxBackendName = 64;

bool IsBackendName(const std::string& name) {
  if (name.empty() || name.size() > kMaxBackendName) return false;
  if (!(name[0] >= 'a' && name[0] <= 'z')) return false;
  for (const char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return false;
    }
  }
  return true;
}

absl::Status CheckBackend(const std::string& field, const std::string& name,
                          const std::set<std::string>& seen) {
  if (!IsBackendName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": '", name,
        "' is not allowed; allowed: 1 to 64 of a-z, 0-9 and '_', starting "
        "with a letter"));
  }
  if (backends::FindBackend(name) != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", name,
                     "' is a native backend; a plugin's name must "
                     "differ from every native one: ",
                     backends::KnownBackendNames()));
  }
  if (seen.count(name) > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", name, "' is listed twice"));
  }
  return absl::OkStatus();
}

// command[0] as it is run: relative ones under `base_dir`, when given.
std::string ProgramPath(const std::string& program,
                        const std::string& base_dir) {
  if (base_dir.empty() || program.empty() || program[0] == '/') return program;
  return (std::filesystem::path(base_dir) / program).lexically_normal();
}

absl::Status CheckCommand(const std::string& field,
                          const plugin::v1::PluginEntry& entry,
                          const std::string& base_dir) {
  if (entry.command().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field,
        ": must not be empty; allowed: an executable's path, then its "
        "arguments"));
  }
  const std::string program = ProgramPath(entry.command(0), base_dir);
  std::error_code error;
  if (!std::filesystem::is_regular_file(program, error) ||
      access(program.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, "[0]: '", program,
                     "' is not an executable file; allowed: the path of one "
                     "(absolute, or relative to ",
                     base_dir.empty() ? std::string("the working directory")
                                      : absl::StrCat("'", base_dir, "'"),
                     ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<plugin::v1::PluginList> ParseJson(const std::string& json) {
  if (const absl::Status strict = CheckStrictJson(json); !strict.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plugins: not JSON: ", strict.message()));
  }
  plugin::v1::PluginList list;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &list);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plugins: not a PluginList (docs/plugins.md): ", parsed.ToString()));
  }
  return list;
}

}  // namespace

absl::StatusOr<std::vector<PluginSpec>> ParsePluginList(
    const std::string& json, const std::string& base_dir) {
  ASSIGN_OR_RETURN(plugin::v1::PluginList list, ParseJson(json));
  std::vector<PluginSpec> specs;
  std::set<std::string> seen;
  for (int i = 0; i < list.plugins_size(); ++i) {
    const plugin::v1::PluginEntry& entry = list.plugins(i);
    const std::string field = absl::StrCat("plugins[", i, "]");
    RETURN_IF_ERROR(CheckBackend(field + ".backend", entry.backend(), seen));
    RETURN_IF_ERROR(CheckCommand(field + ".command", entry, base_dir));
    seen.insert(entry.backend());
    PluginSpec spec{entry.backend(),
                    {entry.command().begin(), entry.command().end()}};
    spec.command[0] = ProgramPath(spec.command[0], base_dir);
    specs.push_back(std::move(spec));
  }
  return specs;
}

absl::StatusOr<std::vector<PluginSpec>> LoadPluginList(
    const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(
        absl::StrCat("--plugins: cannot read '", path, "'"));
  }
  std::stringstream text;
  text << file.rdbuf();
  const std::string base_dir =
      std::filesystem::absolute(std::filesystem::path(path)).parent_path();
  absl::StatusOr<std::vector<PluginSpec>> specs =
      ParsePluginList(text.str(), base_dir);
  if (!specs.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--plugins '", path, "': ", specs.status().message()));
  }
  return specs;
}

void RegisterPlugins(const std::vector<PluginSpec>& specs,
                     const PluginOptions& options, BackendRegistry* registry) {
  for (const PluginSpec& spec : specs) {
    registry->Register(
        MakePluginBackend(spec, options, MakeWarmPluginProcess(spec.command)));
  }
}

std::string DefaultModelLibrary() {
  std::error_code error;
  const std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "libmoetune_model.so";
  const std::filesystem::path dir = self.parent_path();
  // A bundle (deploy/bundle.sh) keeps it beside the binaries; a build tree
  // in lib/ beside bin/.
  const std::filesystem::path in_bundle = dir / "libmoetune_model.so";
  if (std::filesystem::exists(in_bundle, error)) return in_bundle;
  const std::filesystem::path in_build =
      dir.parent_path() / "lib" / "libmoetune_model.so";
  if (std::filesystem::exists(in_build, error)) return in_build;
  return in_bundle;
}

}  // namespace moetune::worker
