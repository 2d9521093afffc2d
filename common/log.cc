#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace moetune {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

const char* LevelTag(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "D";
    case LogLevel::kInfo:
      return "I";
    case LogLevel::kWarning:
      return "W";
    case LogLevel::kError:
      return "E";
  }
  return "?";
}
}  // namespace

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }

void LogLine(LogLevel level, std::string_view message) {
  if (static_cast<int>(level) < g_level.load()) return;
  const std::string line = absl::StrCat(
      LevelTag(level), " ",
      absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone()), " ",
      absl::string_view(message.data(), message.size()), "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace moetune
