// --log_level and --log_format, shared by every binary: defined once here so
// that they mean the same everywhere. Call ApplyLogFlags after parsing.
#pragma once

#include "absl/status/status.h"
#include "common/log.h"

namespace moetune {

// Sets the log level and format from the flags; an empty --log_level means
// `default_level` (the CLI keeps its embedded coordinator quieter than a
// daemon). InvalidArgument names the flag and the allowed values.
absl::Status ApplyLogFlags(LogLevel default_level);

// The names of the flags, for DescribeFlags.
inline constexpr const char* kLogFlagNames[] = {"log_level", "log_format"};

}  // namespace moetune
