#include "common/comm/comm_calibration.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace moetune::comm {
namespace {

std::string Write(const std::string& name, const std::string& text) {
  const std::string path =
      (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(CommCalibrationTest, AFileFromTheBenchReplacesTheAssumptionsAtItsWorld) {
  const std::string path = Write("cal_ok.json", R"({
    "fingerprint": {"device_name": "NVIDIA H200", "nccl_version": "2.28.3"},
    "gpus": 8,
    "fits": [
      {"allreduce": "nccl", "world_size": 8, "latency_us": 14.5,
       "bus_gbps": 300},
      {"allreduce": "oneshot", "world_size": 8, "latency_us": 6.0,
       "in_graph": true}
    ]})");
  const auto calibration = LoadCommCalibration(path);
  ASSERT_TRUE(calibration.ok()) << calibration.status();
  const CommModelParams params = ParamsFrom(*calibration);
  EXPECT_EQ(params.source, "calibrated on 8x NVIDIA H200 (NCCL 2.28.3)");
  ASSERT_EQ(params.fits.size(), 1u);  // the graph fit is not a stream fit
  EXPECT_DOUBLE_EQ(CostOf(params, v1::ALL_REDUCE_NCCL, 8).latency_us, 14.5);
  EXPECT_DOUBLE_EQ(CostOf(params, v1::ALL_REDUCE_NCCL, 2).latency_us,
                   CommModelParams{}.nccl.latency_us);
}

TEST(CommCalibrationTest, ABadFitIsRefusedNamingTheFieldAndTheFile) {
  const std::string path = Write("cal_bad.json", R"({
    "fits": [{"allreduce": "ring", "world_size": 2}]})");
  const auto calibration = LoadCommCalibration(path);
  ASSERT_FALSE(calibration.ok());
  EXPECT_NE(calibration.status().message().find(
                "fits[0].allreduce: 'ring'; allowed: nccl, oneshot"),
            std::string::npos)
      << calibration.status();
  EXPECT_NE(calibration.status().message().find("cal_bad.json"),
            std::string::npos);
  const auto bad_op = LoadCommCalibration(Write("cal_op.json", R"({
    "fits": [{"allreduce": "nccl", "world_size": 2, "op": "alltoall"}]})"));
  ASSERT_FALSE(bad_op.ok());
  EXPECT_NE(bad_op.status().message().find(
                "fits[0].op: 'alltoall'; allowed: allreduce, allgather, "
                "reducescatter"),
            std::string::npos)
      << bad_op.status();
}

TEST(CommCalibrationTest, AMissingOrMalformedFileIsAnError) {
  EXPECT_EQ(LoadCommCalibration("/nonexistent/cal.json").status().code(),
            absl::StatusCode::kNotFound);
  const auto bad = LoadCommCalibration(Write("cal_text.json", "not json"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CommCalibrationTest, NoFitsKeepTheAssumptions) {
  const CommModelParams params = ParamsFrom(v1::CommCalibration{});
  EXPECT_EQ(params.source, "assumed");
  EXPECT_TRUE(params.fits.empty());
}

}  // namespace
}  // namespace moetune::comm
