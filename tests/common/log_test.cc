#include "common/log.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune {
namespace {

using ::testing::HasSubstr;

// 2026-12-01 13:49:06.123 UTC.
constexpr int64_t kMs = 1796132946123;

TEST(LogTest, TextLinesCarryTheUtcDateAndFields) {
  EXPECT_EQ(
      FormatLogLine(LogLevel::kWarning, LogFormat::kText, kMs, "trial finished",
                    {{"trial", 12},
                     {"state", "FAILED"},
                     {"reason", "signal 11 \"segv\""}}),
      "2026-12-01T13:49:06.123Z WARNING trial finished trial=12 "
      "state=FAILED reason=\"signal 11 \\\"segv\\\"\"");
}

TEST(LogTest, JsonLinesAreOneObjectWithNumbersKeptNumbers) {
  const std::string line =
      FormatLogLine(LogLevel::kInfo, LogFormat::kJson, kMs, "done",
                    {{"median_us", 12.5}, {"config", "a b"}});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_THAT(line, HasSubstr("\"time\":\"2026-12-01T13:49:06.123Z\""));
  EXPECT_THAT(line, HasSubstr("\"level\":\"INFO\""));
  EXPECT_THAT(line, HasSubstr("\"msg\":\"done\""));
  EXPECT_THAT(line, HasSubstr("\"median_us\":12.5"));
  EXPECT_THAT(line, HasSubstr("\"config\":\"a b\""));
}

TEST(LogTest, LevelsAndFormatsParseOrNameTheFlag) {
  EXPECT_EQ(*ParseLogLevel("debug", "log_level"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogFormat("json", "log_format"), LogFormat::kJson);
  const auto bad = ParseLogLevel("loud", "log_level");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("--log_level: 'loud' is not allowed; allowed: debug, "
                        "info, warning, error"));
}

}  // namespace
}  // namespace moetune
