// kernels/cuda/base/cublas_api.h: cuBLAS loaded on first use. Runs without a
// GPU (the toolkit's library is on every machine that builds the CUDA code):
// the library loads, its entry points resolve and answer; a handle only
// where there is a device.
#include "kernels/cuda/base/cublas_api.h"

#include <string>

#include "gtest/gtest.h"
#include "kernels/cuda/moe/moe_gpu.h"

namespace moetune::gpu {
namespace {

TEST(CublasApiTest, TheLibraryLoadsOnceAndAnswers) {
  std::string error;
  const CublasApi* api = Cublas(&error);
  ASSERT_NE(api, nullptr) << error;
  EXPECT_EQ(Cublas(nullptr), api);  // loaded once
  EXPECT_STREQ(api->status_name(CUBLAS_STATUS_SUCCESS),
               "CUBLAS_STATUS_SUCCESS");
  EXPECT_STREQ(api->status_name(CUBLAS_STATUS_NOT_INITIALIZED),
               "CUBLAS_STATUS_NOT_INITIALIZED");
}

TEST(CublasApiTest, AHandleWhereThereIsADevice) {
  const CublasApi* api = Cublas(nullptr);
  ASSERT_NE(api, nullptr);
  cublasHandle_t handle = nullptr;
  const cublasStatus_t s = api->create(&handle);
  if (DeviceCount() == 0) {
    EXPECT_NE(s, CUBLAS_STATUS_SUCCESS);  // refused, not crashed
    return;
  }
  ASSERT_EQ(s, CUBLAS_STATUS_SUCCESS) << api->status_name(s);
  EXPECT_EQ(api->set_stream(handle, nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(api->destroy(handle), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
}  // namespace moetune::gpu
