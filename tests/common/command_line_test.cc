#include "common/command_line.h"

#include "absl/flags/flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, test_count, 1, "a test flag");
ABSL_FLAG(bool, test_switch, false, "a test switch");
ABSL_FLAG(std::string, test_out, "", "a test file name");

namespace moetune {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<CommandLineCheck> Check(std::vector<const char*> args) {
  args.insert(args.begin(), "prog");
  return CheckCommandLine(static_cast<int>(args.size()), args.data());
}

TEST(CommandLineTest, SeparatesPositionalsFromKnownFlags) {
  const auto check = Check({"sweep", "--test_count=3", "--test_switch",
                            "--notest_switch", "--test_count", "4", "x"});
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_THAT(check->positional, ElementsAre("sweep", "x"));
  EXPECT_FALSE(check->help);
}

// "--out -" (standard output) reaches abseil as "--out=-", which it takes
// without asking whether "-" was meant as a flag.
TEST(CommandLineTest, JoinsSeparateValuesSoADashIsAValue) {
  const auto check = Check({"export", "--test_out", "-", "--test_switch",
                            "--test_count", "-4", "--", "--x"});
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_THAT(check->args,
              ElementsAre("prog", "export", "--test_out=-", "--test_switch",
                          "--test_count=-4", "--", "--x"));
  EXPECT_THAT(check->positional, ElementsAre("export", "--x"));
}

TEST(CommandLineTest, HelpAndVersionAreRequestsNotErrors) {
  EXPECT_TRUE(Check({"--help"})->help);
  EXPECT_TRUE(Check({"sweep", "-h"})->help);
  EXPECT_TRUE(Check({"--version"})->version);
}

TEST(CommandLineTest, UnknownFlagsAndBadValuesNameTheFlag) {
  const auto unknown = Check({"--bogus=1"});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("unknown flag --bogus"));
  const auto bad = Check({"--test_count=many"});
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("--test_count: 'many' is not a valid value"));
  EXPECT_THAT(std::string(Check({"--test_count"}).status().message()),
              HasSubstr("--test_count: missing its value"));
  EXPECT_FALSE(Check({"--notest_count"}).ok());  // "no" only for booleans
}

TEST(CommandLineTest, DescribesFlagsAndTheVersion) {
  EXPECT_THAT(DescribeFlags({"test_count"}),
              HasSubstr("--test_count=1\n      a test flag"));
  EXPECT_EQ(DescribeFlags({"test_switch", "test_count"},
                          {{"test_count", "how many, here"}}),
            "  --test_switch=false\n      a test switch\n"
            "  --test_count=1\n      how many, here\n");
  EXPECT_THAT(VersionLine("moetune"),
              ::testing::MatchesRegex("moetune [0-9]+\\.[0-9]+\\.[0-9]+ "
                                      "\\(build .+\\)"));
}

}  // namespace
}  // namespace moetune
