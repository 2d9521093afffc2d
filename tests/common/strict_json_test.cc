// CheckStrictJson: RFC 8259 text only, with the place of the first problem.
#include "common/strict_json.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune {
namespace {

using ::testing::HasSubstr;

TEST(StrictJsonTest, TakesWhatRfc8259Writes) {
  for (const char* text :
       {"{}", "[]",
        " {\"a\": [1, -2.5e3, 0, true, false, null, \"x\\u00e9\"]} ",
        "{\"nested\": {\"b\": [[], {}]}}", "\"just a string\"", "0.5"}) {
    EXPECT_TRUE(CheckStrictJson(text).ok()) << text;
  }
}

TEST(StrictJsonTest, RefusesATrailingCommaNamingWhere) {
  const absl::Status object = CheckStrictJson("{\n  \"name\": \"s\",\n}");
  EXPECT_EQ(object.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(object.message()),
              HasSubstr("line 3 column 1: expected a member after ','"));
  EXPECT_THAT(std::string(CheckStrictJson("[1, 2,]").message()),
              HasSubstr("expected a value after ','"));
}

TEST(StrictJsonTest, RefusesWhatOtherParsersRefuse) {
  for (const char* text :
       {"", "{", "{\"a\" 1}", "{a: 1}", "[1 2]", "01", "1.", "'x'", "\"\x01\"",
        "\"\\x\"", "{} {}", "nul", "[-]", "NaN"}) {
    EXPECT_FALSE(CheckStrictJson(text).ok()) << text;
  }
}

TEST(StrictJsonTest, BoundsTheNesting) {
  const std::string deep(kMaxJsonDepth, '[');
  const std::string close(kMaxJsonDepth, ']');
  EXPECT_TRUE(CheckStrictJson(deep + close).ok());
  EXPECT_THAT(std::string(CheckStrictJson("[" + deep + close + "]").message()),
              HasSubstr("at most 64 nested levels"));
}

}  // namespace
}  // namespace moetune
