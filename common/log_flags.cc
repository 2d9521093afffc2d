#include "common/log_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, log_level, "",
          "debug, info, warning or error (default: info for daemons, "
          "error for the moetune CLI)");
ABSL_FLAG(std::string, log_format, "text",
          "text (UTC timestamp, level, message, key=value fields) or json "
          "(one object per line: time, level, msg and the fields)");

namespace moetune {

absl::Status ApplyLogFlags(LogLevel default_level) {
  const std::string level_text = absl::GetFlag(FLAGS_log_level);
  LogLevel level = default_level;
  if (!level_text.empty()) {
    absl::StatusOr<LogLevel> parsed = ParseLogLevel(level_text, "log_level");
    if (!parsed.ok()) return parsed.status();
    level = *parsed;
  }
  absl::StatusOr<LogFormat> format =
      ParseLogFormat(absl::GetFlag(FLAGS_log_format), "log_format");
  if (!format.ok()) return format.status();
  SetLogLevel(level);
  SetLogFormat(*format);
  return absl::OkStatus();
}

}  // namespace moetune
