#include "common/clock.h"

#include "gtest/gtest.h"

namespace moetune {
namespace {

// Each scope adds its own span; spans of separate scopes accumulate.
TEST(AddElapsedSecondsTest, AddsEachScopesMonotonicSpan) {
  FakeClock clock;
  double total = 0.5;
  {
    const AddElapsedSeconds timing(clock, &total);
    clock.AdvanceMs(250);
  }
  EXPECT_DOUBLE_EQ(total, 0.75);
  clock.AdvanceMs(1000);  // outside any scope: not counted
  {
    const AddElapsedSeconds timing(clock, &total);
    clock.AdvanceNs(1'000'000);
  }
  EXPECT_DOUBLE_EQ(total, 0.751);
}

}  // namespace
}  // namespace moetune
