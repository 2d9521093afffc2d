// Reading a sweep spec file: protobuf's JSON mapping (.json) or text format
// (.txtpb, .textproto, .pbtxt). Parsing only; validation is the tuner's.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/moetune.pb.h"

namespace moetune::cli {

absl::StatusOr<v1::SweepSpec> LoadSweepSpec(const std::string& path);
absl::StatusOr<v1::SweepSpec> ParseSweepSpec(const std::string& text,
                                             bool text_format);

// One warning for each listed backend (of this build) that lacks some of
// space.tiles: which listed tiles it leaves out, and its own tiles; when it
// has none of them it runs its default tile for each shape. The spec is
// valid (every listed tile is some listed backend's), so the sweep would
// drop these silently.
std::vector<std::string> DroppedTileWarnings(const v1::SweepSpec& spec);

}  // namespace moetune::cli
