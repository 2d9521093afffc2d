#include "coordinator/cli/spec_file.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/strict_json.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

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

}  // namespace moetune::cli
