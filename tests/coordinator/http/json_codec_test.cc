// Requests from URLs and bodies, and responses as JSON: what the HTTP API
// accepts, and how it says what it refuses.
#include "coordinator/http/json_codec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/moetune.pb.h"

namespace moetune::coordinator::http {
namespace {

using ::testing::HasSubstr;

TEST(JsonCodecTest, QueryParametersFillScalarAndEnumFields) {
  v1::TrialFilter filter;
  ASSERT_TRUE(FillRequest({{"sweep_id", "7"},
                           {"state", "DONE"},
                           {"moeBackend", "fused_gemv"},
                           {"include_samples", "true"}},
                          "", &filter)
                  .ok());
  EXPECT_EQ(filter.sweep_id(), 7);
  EXPECT_EQ(filter.state(), v1::DONE);
  EXPECT_EQ(filter.moe_backend(), "fused_gemv");
  EXPECT_TRUE(filter.include_samples());
}

TEST(JsonCodecTest, BodyIsTheJsonMappingAndTheUrlWins) {
  v1::TrialFilter filter;
  ASSERT_TRUE(FillRequest({{"limit", "5"}}, R"({"sweepId": "3", "limit": 100})",
                          &filter)
                  .ok());
  EXPECT_EQ(filter.sweep_id(), 3);
  EXPECT_EQ(filter.limit(), 5);
}

TEST(JsonCodecTest, ABodyWithATrailingCommaIsRefused) {
  v1::TrialFilter filter;
  const absl::Status status =
      FillRequest({}, R"({"sweepId": "3", "limit": 100,})", &filter);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("expected a member after ','"));
}

TEST(JsonCodecTest, UnknownParameterNamesTheAllowedOnes) {
  v1::GetSweepRequest request;
  const absl::Status status = FillRequest({{"sweep", "1"}}, "", &request);
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_THAT(status.message(), HasSubstr("sweep: not a query parameter"));
  EXPECT_THAT(status.message(), HasSubstr("allowed: sweep_id"));
}

TEST(JsonCodecTest, MessageFieldsGoInTheBodyNotTheUrl) {
  v1::SubmitSweepRequest request;
  const absl::Status status = FillRequest({{"spec", "x"}}, "", &request);
  EXPECT_THAT(status.message(), HasSubstr("allowed: request_id"));
  EXPECT_THAT(status.message(), HasSubstr("JSON body"));
}

TEST(JsonCodecTest, BadValuesAreRefusedNamingTheParameter) {
  v1::TrialFilter filter;
  EXPECT_THAT(FillRequest({{"include_samples", "yes"}}, "", &filter).message(),
              HasSubstr("include_samples: 'yes' is not allowed; allowed: "
                        "true, false"));
  const absl::Status number = FillRequest({{"sweep_id", "x\"1"}}, "", &filter);
  EXPECT_TRUE(absl::IsInvalidArgument(number));
  EXPECT_THAT(number.message(), HasSubstr("query parameters"));
  EXPECT_THAT(FillRequest({}, "{not json", &filter).message(),
              HasSubstr("body: not a moetune.v1.TrialFilter"));
}

TEST(JsonCodecTest, ResponsesPrintProtoNamesAndZeros) {
  v1::Sweep sweep;
  sweep.set_sweep_id(12);
  const std::string json = ToJson(sweep);
  EXPECT_THAT(json, HasSubstr("\"sweep_id\":\"12\""));
  EXPECT_THAT(json, HasSubstr("\"total_trials\":0"));
}

TEST(JsonCodecTest, JsonEscapeKeepsStringsWellFormed) {
  EXPECT_EQ(JsonEscape("a\"b\\c\nd"), "a\\\"b\\\\c d");
}

}  // namespace
}  // namespace moetune::coordinator::http
