#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/json_text.h"
#include "google/protobuf/struct.pb.h"

namespace moetune {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
  }
  return "?";
}

// RFC 3339 in UTC with milliseconds: sorts as text, never ambiguous.
std::string Timestamp(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

std::string TextValue(const LogField& field) {
  if (field.is_number) return absl::StrFormat("%.10g", field.number);
  if (!field.text.empty() &&
      field.text.find_first_of(" \"=\t\n") == std::string::npos) {
    return field.text;
  }
  std::string quoted = "\"";
  for (char c : field.text) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c == '\n' ? ' ' : c;
  }
  return quoted + "\"";
}

// time, level and msg first, then the fields in the caller's order.
std::string JsonLine(LogLevel level, int64_t unix_ms, absl::string_view message,
                     const std::vector<LogField>& fields) {
  std::vector<std::pair<std::string, google::protobuf::Value>> values(3);
  values[0].first = "time";
  values[0].second.set_string_value(Timestamp(unix_ms));
  values[1].first = "level";
  values[1].second.set_string_value(LevelName(level));
  values[2].first = "msg";
  values[2].second.set_string_value(std::string(message));
  for (const LogField& field : fields) {
    auto& [key, value] = values.emplace_back();
    key = field.key;
    if (field.is_number) {
      value.set_number_value(field.number);
    } else {
      value.set_string_value(field.text);
    }
  }
  return JsonObjectLine(values);
}

}  // namespace

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }
void SetLogFormat(LogFormat format) { g_format = static_cast<int>(format); }

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text,
                                       absl::string_view flag_name) {
  if (text == "debug") return LogLevel::kDebug;
  if (text == "info") return LogLevel::kInfo;
  if (text == "warning") return LogLevel::kWarning;
  if (text == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag_name, ": '", text,
                   "' is not allowed; allowed: debug, info, warning, error"));
}

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view text,
                                         absl::string_view flag_name) {
  if (text == "text") return LogFormat::kText;
  if (text == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag_name, ": '", text, "' is not allowed; allowed: text, json"));
}

std::string FormatLogLine(LogLevel level, LogFormat format, int64_t unix_ms,
                          absl::string_view message,
                          const std::vector<LogField>& fields) {
  if (format == LogFormat::kJson) {
    return JsonLine(level, unix_ms, message, fields);
  }
  std::string line =
      absl::StrCat(Timestamp(unix_ms), " ", LevelName(level), " ", message);
  for (const LogField& field : fields) {
    absl::StrAppend(&line, " ", field.key, "=", TextValue(field));
  }
  return line;
}

void LogLine(LogLevel level, absl::string_view message) {
  LogLine(level, message, {});
}

void LogLine(LogLevel level, absl::string_view message,
             const std::vector<LogField>& fields) {
  if (static_cast<int>(level) < g_level.load()) return;
  const std::string line =
      FormatLogLine(level, static_cast<LogFormat>(g_format.load()),
                    absl::ToUnixMillis(absl::Now()), message, fields) +
      "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace moetune
