#include "worker/frames.h"

#include <unistd.h>

#include "gtest/gtest.h"

namespace moetune::worker {
namespace {

TEST(FramesTest, TakesWholeFramesOffTheFrontOnly) {
  std::string buffer = EncodeFrame("hello") + EncodeFrame("");
  const std::string second = EncodeFrame("world");
  buffer += second.substr(0, 6);  // a frame cut short
  bool corrupt = true;
  EXPECT_EQ(TakeFrame(&buffer, &corrupt), "hello");
  EXPECT_FALSE(corrupt);
  EXPECT_EQ(TakeFrame(&buffer, &corrupt), "");
  EXPECT_EQ(TakeFrame(&buffer, &corrupt), std::nullopt);
  buffer += second.substr(6);
  EXPECT_EQ(TakeFrame(&buffer, &corrupt), "world");
  EXPECT_TRUE(buffer.empty());
}

TEST(FramesTest, AnAbsurdLengthIsCorrupt) {
  std::string buffer(
      "\xff\xff\xff\xff"
      "abc",
      7);
  bool corrupt = false;
  EXPECT_EQ(TakeFrame(&buffer, &corrupt), std::nullopt);
  EXPECT_TRUE(corrupt);
}

TEST(FramesTest, ReadsWhatWasWrittenThroughAPipe) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string binary("a\0b\xff", 4);
  ASSERT_TRUE(WriteAll(fds[1], EncodeFrame(binary) + EncodeFrame("x")));
  close(fds[1]);
  std::string payload;
  ASSERT_TRUE(ReadFrame(fds[0], &payload));
  EXPECT_EQ(payload, binary);
  ASSERT_TRUE(ReadFrame(fds[0], &payload));
  EXPECT_EQ(payload, "x");
  EXPECT_FALSE(ReadFrame(fds[0], &payload));  // end of input
  close(fds[0]);
}

}  // namespace
}  // namespace moetune::worker
