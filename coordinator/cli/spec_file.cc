#include "coordinator/cli/spec_file.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/strict_json.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "kernels/backends/registry.h"
#include "kernels/backends/tile_shape.h"

namespace moetune::cli {

absl::StatusOr<v1::SweepSpec> ParseSweepSpec(const std::string& text,
                                             bool text_format) {
  v1::SweepSpec spec;
  if (text_format) {
    if (!google::protobuf::TextFormat::ParseFromString(text, &spec)) {
      return absl::InvalidArgumentError("not a valid text-format SweepSpec");
    }
    return spec;
  }
  if (absl::Status strict = CheckStrictJson(text); !strict.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a valid JSON SweepSpec: ", strict.message()));
  }
  const auto status = google::protobuf::util::JsonStringToMessage(text, &spec);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a valid JSON SweepSpec: ", status.message().as_string()));
  }
  return spec;
}

absl::StatusOr<v1::SweepSpec> LoadSweepSpec(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    // A spec that is not there is a usage error (exit 2), like a bad one.
    return absl::InvalidArgumentError(
        absl::StrCat("--spec: cannot read '", path, "'"));
  }
  std::stringstream text;
  text << file.rdbuf();
  const bool text_format = absl::EndsWith(path, ".txtpb") ||
                           absl::EndsWith(path, ".textproto") ||
                           absl::EndsWith(path, ".pbtxt");
  absl::StatusOr<v1::SweepSpec> spec = ParseSweepSpec(text.str(), text_format);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--spec: ", path, ": ", spec.status().message()));
  }
  return spec;
}

std::vector<std::string> DroppedTileWarnings(const v1::SweepSpec& spec) {
  std::vector<std::string> warnings;
  for (const std::string& name : spec.space().moe_backends()) {
    const backends::BackendDescriptor* backend = backends::FindBackend(name);
    if (backend == nullptr || backend->tiles.empty()) continue;
    std::vector<std::string> dropped;
    for (const v1::TileShape& listed : spec.space().tiles()) {
      const backends::Tile tile = backends::TileOf(listed);
      if (!backend->HasTile(tile)) dropped.push_back(backends::TileText(tile));
    }
    if (dropped.empty()) continue;
    const bool none_kept =
        static_cast<int>(dropped.size()) == spec.space().tiles_size();
    warnings.push_back(absl::StrCat(
        "space.tiles: ", absl::StrJoin(dropped, ", "),
        dropped.size() == 1 ? " is not a tile" : " are not tiles", " of ", name,
        " (its tiles: ", backend->TileList(), "): ",
        none_kept ? "it runs its default tile for each shape instead"
                  : "left out for it"));
  }
  return warnings;
}

}  // namespace moetune::cli
