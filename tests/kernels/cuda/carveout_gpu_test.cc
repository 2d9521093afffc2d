// kernels/cuda/base/carveout.h FittedCarveout: the carveout asked for holds the
// blocks a grid needs an SM (at least one, at most the kernel's occupancy)
// and one percent less would not. Skips without a device.
#include <algorithm>
#include <cstdint>

#include "gtest/gtest.h"
#include "kernels/cuda/moe/moe_gpu.h"
#include "tests/kernels/cuda/step_kernels_runner.h"

namespace moetune::gpu::testing {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

// Whether `percent` of the SM's largest shared memory holds `blocks` of the
// test kernel's blocks.
bool Holds(int percent, int blocks, const CarveoutDevice& d) {
  const int64_t bytes = int64_t{percent} * d.most / 100;
  return bytes >= int64_t{blocks} * (kCarveoutKernelSharedBytes + d.reserved);
}

void ExpectFits(int64_t grid, int blocks) {
  CarveoutDevice d;
  const int percent = CarveoutOfASharedMemoryKernel(grid, &d);
  SCOPED_TRACE(::testing::Message() << "grid " << grid << ", " << blocks
                                    << " blocks an SM, " << percent << " %");
  ASSERT_GT(percent, 0);
  ASSERT_LE(percent, 100);
  EXPECT_TRUE(Holds(percent, blocks, d));
  EXPECT_FALSE(Holds(percent - 1, blocks, d));
}

TEST(CarveoutGpuTest, HoldsTheBlocksTheGridNeedsAnSm) {
  SKIP_WITHOUT_GPU();
  CarveoutDevice d;
  CarveoutOfASharedMemoryKernel(1, &d);
  ASSERT_GT(d.sms, 0);
  ExpectFits(1, 1);
  ExpectFits(d.sms, 1);
  ExpectFits(d.sms + 1, 2);
  ExpectFits(3 * d.sms, 3);
}

TEST(CarveoutGpuTest, NoMoreThanTheKernelsOccupancy) {
  SKIP_WITHOUT_GPU();
  CarveoutDevice d;
  CarveoutOfASharedMemoryKernel(1, &d);
  // 256 threads a block: 8 blocks an SM of 2048 threads, fewer where the
  // shared memory holds fewer.
  const int most_blocks =
      std::min<int>(8, d.most / (kCarveoutKernelSharedBytes + d.reserved));
  ExpectFits(int64_t{1000} * d.sms, most_blocks);
}

}  // namespace
}  // namespace moetune::gpu::testing
