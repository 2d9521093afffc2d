// The file `moetune export` writes: the winning configuration per batch
// size, keyed by the batch size as a string at the top level, the way
// vLLM's tuned fused-MoE config files are ({"1": {...}, "8": {...}}), so a
// launcher loads it with one json.load and picks the entry for its batch
// (or the nearest one it has). Each entry carries the configuration and,
// for provenance, the figures and the trial, sweep and device behind it.
// Pure.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "proto/moetune.pb.h"

namespace moetune::cli {

// `context` > 0 keeps only workloads of that context length. Two winners
// for one batch size (several contexts, presets or devices in one sweep)
// are InvalidArgument naming what differs; no winner is NotFound.
absl::StatusOr<std::string> WinnersJson(const v1::GetBestResponse& best,
                                        int context);

}  // namespace moetune::cli
