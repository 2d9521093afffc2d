// Bounded, printable text: what a client may name things, and how text
// stored before the bounds is printed.
#include "common/text_bounds.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/moetune.pb.h"

namespace moetune {
namespace {

using ::testing::HasSubstr;

TEST(TextBoundsTest, PrintableUnicodeIsTaken) {
  for (const char* text : {"", "glm5 nightly 2026-12-07", "décodage", "夜间",
                           "sweep 🚀", "tabs\tare not"}) {
    const absl::Status status = CheckPrintable(text, "name", kMaxNameBytes);
    if (std::string(text).find('\t') != std::string::npos) {
      EXPECT_FALSE(status.ok());
    } else {
      EXPECT_TRUE(status.ok()) << text << ": " << status;
    }
  }
}

TEST(TextBoundsTest, ControlsOverridesAndBadUtf8AreRefusedNamingTheByte) {
  for (const std::string text :
       {std::string("red \x1b[31m"), std::string("two\nlines"),
        std::string("evil \xe2\x80\xae txt"), std::string("\xc3"),
        std::string("\xc0\xaf"), std::string("\xed\xa0\x80"),
        std::string("del \x7f"), std::string("c1 \xc2\x9b")}) {
    const absl::Status status = CheckPrintable(text, "name", kMaxNameBytes);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << text;
    EXPECT_THAT(std::string(status.message()), HasSubstr("name: byte "));
  }
}

TEST(TextBoundsTest, LengthIsBoundedBeforeAnythingElse) {
  const std::string long_name(1572864, 'x');
  EXPECT_EQ(CheckPrintable(long_name, "name", kMaxNameBytes).message(),
            "name: 1572864 bytes; at most 256");
}

TEST(TextBoundsTest, MessagesAreCheckedFieldByFieldWithTheirPaths) {
  v1::SweepSpec spec;
  spec.set_name("ok");
  spec.mutable_space()->add_moe_backends("cpu_reference");
  spec.mutable_space()->add_moe_backends("bad\x1b");
  EXPECT_THAT(std::string(CheckMessageText(spec, "").message()),
              HasSubstr("space.moe_backends[1]: byte 3"));
  spec.mutable_space()->set_moe_backends(1, "cpu_blocked");
  EXPECT_TRUE(CheckMessageText(spec, "").ok());
  spec.set_name(std::string(kMaxNameBytes + 1, 'n'));
  EXPECT_THAT(std::string(CheckMessageText(spec, "spec").message()),
              HasSubstr("spec.name: 257 bytes; at most 256"));
}

TEST(TextBoundsTest, EscapedForATerminal) {
  EXPECT_EQ(EscapeForTerminal("a\x1b[31mb\ne \xe2\x80\xae z \xc3"),
            "a\\x1B[31mb\\x0Ae \\u202E z \\xC3");
  EXPECT_EQ(EscapeForTerminal("décodage 夜间"), "décodage 夜间");
}

}  // namespace
}  // namespace moetune
