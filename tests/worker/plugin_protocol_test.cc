// The worker's reading of plugin replies (worker/plugin_protocol.h): every
// way a reply can be wrong is a status naming it, never a crash.
#include "worker/plugin_protocol.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune::worker {
namespace {

using ::testing::HasSubstr;

TEST(PluginProtocolTest, RequestsCarryTheVersionAndProtoFieldNames) {
  plugin::v1::PluginRequest request;
  request.mutable_run()->set_warmup_iterations(2);
  const std::string json = EncodePluginRequest(request);
  EXPECT_THAT(json, HasSubstr("\"protocol_version\":1"));
  EXPECT_THAT(json, HasSubstr("\"warmup_iterations\":2"));
}

TEST(PluginProtocolTest, ReadsAReplyOfTheExpectedKind) {
  const auto reply = DecodePluginReply(
      R"({"protocol_version": 1, "hello": {"backends": ["a"]}})",
      ReplyKind::kHello);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->hello().backends(0), "a");
}

TEST(PluginProtocolTest, ProtocolBreachesAreDataLoss) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\x01\x02garbage", "not a PluginReply in JSON"},
      {R"({"protocol_version": 1, "hello": {"backends": 3}})",
       "not a PluginReply in JSON"},
      {R"({"protocol_version": 2, "hello": {}})", "protocol version 2"},
      {R"({"protocol_version": 1, "probe": {}})",
       "answered a hello request with a probe reply"},
  };
  for (const auto& [payload, message] : cases) {
    const auto reply = DecodePluginReply(payload, ReplyKind::kHello);
    EXPECT_TRUE(absl::IsDataLoss(reply.status())) << reply.status();
    EXPECT_THAT(reply.status().message(), HasSubstr(message));
  }
}

TEST(PluginProtocolTest, ErrorRepliesKeepTheirCode) {
  const auto reply = DecodePluginReply(
      R"({"protocol_version": 1, "error": {"code": "FAILED_PRECONDITION",
          "message": "no such tile"}})",
      ReplyKind::kRun);
  EXPECT_TRUE(absl::IsFailedPrecondition(reply.status()));
  EXPECT_THAT(reply.status().message(), HasSubstr("no such tile"));
}

TEST(PluginProtocolTest, OutputShapeAndSizeAreChecked) {
  plugin::v1::RunReply run;
  run.add_output_shape(2);
  run.add_output_shape(4);
  const float values[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  run.set_output(std::string(reinterpret_cast<const char*>(values), 32));
  const auto output = DecodeRunOutput(run, 2, 4);
  ASSERT_TRUE(output.ok()) << output.status();
  EXPECT_EQ((*output)[7], 8.0f);
  EXPECT_THAT(DecodeRunOutput(run, 2, 5).status().message(),
              HasSubstr("shape [2, 4]"));
  run.set_output("short");
  EXPECT_THAT(DecodeRunOutput(run, 2, 4).status().message(),
              HasSubstr("holds 5 bytes"));
}

TEST(PluginProtocolTest, SamplesAreCountedAndFinite) {
  plugin::v1::RunReply run;
  run.add_samples_us(3);
  EXPECT_TRUE(DecodeRunSamples(run, 1).ok());
  EXPECT_THAT(DecodeRunSamples(run, 2).status().message(),
              HasSubstr("1 samples for 2"));
  run.add_samples_us(-1);
  EXPECT_THAT(DecodeRunSamples(run, 2).status().message(),
              HasSubstr("a sample of -1"));
}

}  // namespace
}  // namespace moetune::worker
