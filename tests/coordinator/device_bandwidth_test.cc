#include "coordinator/device_bandwidth.h"

#include "gtest/gtest.h"

namespace moetune::coordinator {
namespace {

v1::Probe ProbeOf(const std::string& device, double gbps, int sm_clock = 0) {
  v1::Probe probe;
  probe.mutable_fingerprint()->set_device_name(device);
  probe.mutable_fingerprint()->set_sm_clock_mhz(sm_clock);
  probe.mutable_fingerprint()->set_build_hash(std::to_string(gbps));
  probe.mutable_device()->set_measured_read_gbps(gbps);
  return probe;
}

TEST(DeviceBandwidthsTest, TheBestProbePerKindOfDeviceWhateverTheBuild) {
  DeviceBandwidths bandwidths;
  bandwidths.Note(ProbeOf("H200", 3100));  // under load
  bandwidths.Note(ProbeOf("H200", 4500));
  bandwidths.Note(ProbeOf("H200", 4200));
  bandwidths.Note(ProbeOf("H100", 3300));
  EXPECT_EQ(bandwidths.Best(ProbeOf("H200", 0).fingerprint()), 4500);
  EXPECT_EQ(bandwidths.Best(ProbeOf("H100", 0).fingerprint()), 3300);
  // Another clock is another kind of device.
  EXPECT_EQ(bandwidths.Best(ProbeOf("H200", 0, 1500).fingerprint()), 0);
}

TEST(RefloorTest, RaisesTheBandwidthNeverLowersIt) {
  v1::TrialResult result;
  result.mutable_stats()->set_median_us(50);
  v1::Roofline& r = *result.mutable_roofline();
  r.set_bytes(90'000);  // 30 us at 3 GB/s (+ 5 us comm)
  r.set_comm_floor_us(5);
  r.set_floor_us(35);
  r.set_efficiency(0.7);
  EXPECT_DOUBLE_EQ(FloorReadGbps(r), 3);
  RefloorAt(2, &result);  // lower: kept
  EXPECT_DOUBLE_EQ(r.floor_us(), 35);
  EXPECT_DOUBLE_EQ(r.read_gbps(), 3);
  RefloorAt(9, &result);
  EXPECT_DOUBLE_EQ(r.floor_us(), 15);
  EXPECT_DOUBLE_EQ(r.efficiency(), 0.3);
  EXPECT_DOUBLE_EQ(r.read_gbps(), 9);
}

TEST(RefloorTest, ModelledCommunicationStaysOutOfTheEfficiency) {
  v1::TrialResult result;
  result.mutable_stats()->set_median_us(50);
  v1::Roofline& r = *result.mutable_roofline();
  r.set_bytes(90'000);  // 30 us at 3 GB/s (+ 5 us modelled comm)
  r.set_comm_floor_us(5);
  r.set_comm_modelled(true);
  r.set_floor_us(35);
  RefloorAt(9, &result);
  EXPECT_DOUBLE_EQ(r.floor_us(), 15);
  EXPECT_DOUBLE_EQ(r.efficiency(), 10.0 / 50.0);  // the median holds no comm
}

TEST(RefloorTest, AnUntimedResultIsLeftAlone) {
  v1::TrialResult result;
  RefloorAt(9, &result);
  EXPECT_EQ(result.roofline().floor_us(), 0);
  EXPECT_EQ(result.roofline().read_gbps(), 0);
}

}  // namespace
}  // namespace moetune::coordinator
