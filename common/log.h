// Minimal leveled logging to stderr with a timestamp. abseil 20220623 has no
// absl/log; spdlog would be one more shared library to carry to GPU hosts.
// Thread-safe: each line is formatted first and written with one call.
#pragma once

#include <string_view>

#include "absl/strings/str_cat.h"

namespace moetune {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void SetLogLevel(LogLevel level);
void LogLine(LogLevel level, std::string_view message);

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
