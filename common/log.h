// Leveled logging to stderr, one line per event: a UTC timestamp with the
// date (so that lines from hosts in different zones, and across midnight,
// order), the level, the message and optional key=value fields; or the same
// as one JSON object per line (--log_format json) for log collectors.
// abseil 20220623 has no absl/log; spdlog would be one more shared library to
// carry to GPU hosts. Thread-safe: each line is formatted first and written
// with one call.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace moetune {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };
enum class LogFormat { kText, kJson };

void SetLogLevel(LogLevel level);
void SetLogFormat(LogFormat format);
// "debug", "info", "warning" or "error"; an error names `flag_name` and the
// allowed values.
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text,
                                       absl::string_view flag_name);
// "text" or "json".
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view text,
                                         absl::string_view flag_name);

// A structured field of a log line: a number stays a number in JSON.
struct LogField {
  LogField(std::string k, std::string v) : key(std::move(k)), text(v) {}
  LogField(std::string k, const char* v) : key(std::move(k)), text(v) {}
  LogField(std::string k, double v) : key(std::move(k)), number(v) {
    is_number = true;
  }
  LogField(std::string k, int64_t v) : LogField(std::move(k), double(v)) {}
  LogField(std::string k, int v) : LogField(std::move(k), double(v)) {}
  std::string key;
  std::string text;
  double number = 0;
  bool is_number = false;
};

void LogLine(LogLevel level, absl::string_view message);
void LogLine(LogLevel level, absl::string_view message,
             const std::vector<LogField>& fields);
// The line LogLine writes at `unix_ms`, without its newline (for tests).
std::string FormatLogLine(LogLevel level, LogFormat format, int64_t unix_ms,
                          absl::string_view message,
                          const std::vector<LogField>& fields);

template <typename... Args>
void LogDebug(const Args&... args) {
  LogLine(LogLevel::kDebug, absl::StrCat(args...));
}
template <typename... Args>
void LogInfo(const Args&... args) {
  LogLine(LogLevel::kInfo, absl::StrCat(args...));
}
template <typename... Args>
void LogWarning(const Args&... args) {
  LogLine(LogLevel::kWarning, absl::StrCat(args...));
}
template <typename... Args>
void LogError(const Args&... args) {
  LogLine(LogLevel::kError, absl::StrCat(args...));
}

}  // namespace moetune
