#include "db/codec.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/moetune.pb.h"

namespace moetune::db {
namespace {

using ::testing::HasSubstr;

TEST(CodecTest, OneSampleIsItsLittleEndianBits) {
  // 1.0 = 0x3FF0000000000000; -2.0 = 0xC000000000000000.
  const std::vector<double> samples = {1.0, -2.0};
  const std::string blob = EncodeSamples(samples);
  const std::string want(
      "\x00\x00\x00\x00\x00\x00\xF0\x3F"
      "\x00\x00\x00\x00\x00\x00\x00\xC0",
      16);
  EXPECT_EQ(blob, want);
}

TEST(CodecTest, SamplesRoundTripBitExactly) {
  const double nan_with_payload = std::bit_cast<double>(0x7FF800000000BEEFull);
  const std::vector<double> samples = {
      0.1,
      1.0 / 3.0,
      -0.0,
      std::numeric_limits<double>::denorm_min(),
      std::numeric_limits<double>::infinity(),
      nan_with_payload,
      123456.789};
  absl::StatusOr<std::vector<double>> back =
      DecodeSamples(EncodeSamples(samples));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint64_t>((*back)[i]),
              std::bit_cast<uint64_t>(samples[i]))
        << "sample " << i;
  }
}

TEST(CodecTest, EmptySamples) {
  EXPECT_EQ(EncodeSamples({}), "");
  absl::StatusOr<std::vector<double>> back = DecodeSamples("");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->empty());
}

TEST(CodecTest, TruncatedBlobIsDataLoss) {
  absl::StatusOr<std::vector<double>> back = DecodeSamples("1234567");
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(back.status().message(), HasSubstr("7 bytes"));
}

TEST(CodecTest, MessagesRoundTripAndGarbageIsDataLoss) {
  v1::TrialConfig config;
  config.set_moe_backend("cpu_reference");
  config.set_tp(2);
  v1::TrialConfig back;
  ASSERT_TRUE(ParseMessage(SerializeMessage(config), "config", &back).ok());
  EXPECT_EQ(back.moe_backend(), "cpu_reference");
  EXPECT_EQ(back.tp(), 2);

  // 0x0A declares a length-delimited field 1 whose length byte is missing.
  absl::Status status = ParseMessage("\x0A", "config of trial 7", &back);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("config of trial 7"));
  EXPECT_THAT(status.message(), HasSubstr("moetune.v1.TrialConfig"));
}

TEST(CodecTest, SerializationIsDeterministicForMaps) {
  v1::Sweep a;
  (*a.mutable_trial_counts())["QUEUED"] = 1;
  (*a.mutable_trial_counts())["DONE"] = 2;
  (*a.mutable_trial_counts())["LEASED"] = 3;
  v1::Sweep b;
  (*b.mutable_trial_counts())["LEASED"] = 3;
  (*b.mutable_trial_counts())["DONE"] = 2;
  (*b.mutable_trial_counts())["QUEUED"] = 1;
  EXPECT_EQ(SerializeMessage(a), SerializeMessage(b));
}

}  // namespace
}  // namespace moetune::db
