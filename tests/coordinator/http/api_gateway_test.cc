// The HTTP API's calls against a real coordinator (in-process, loopback,
// port 0): the same answers and refusals as gRPC, read-only unless allowed,
// bearer tokens passed on.
#include "coordinator/http/api_gateway.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/clock.h"
#include "coordinator/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune::coordinator::http {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kSpec[] = R"({"spec": {"name": "http",
  "workload": {"modelPreset": "tiny", "batchSizes": [1],
               "contextLengths": [16], "region": "DECODE_STEP"},
  "space": {"moeBackends": ["cpu_reference"]}}})";

class ApiGatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("api_gateway_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "tokens")
        << "read read-token-0123456789\nwrite write-token-0123456789\n";
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  void Start(bool tokens) {
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.worker_listen = "127.0.0.1:0";
    options.db_path = (dir_ / "api.db").string();
    if (tokens) options.tokens_file = (dir_ / "tokens").string();
    absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
        CoordinatorServer::Start(options, RealClock::Get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  ApiGateway Gateway(bool allow_writes) {
    return ApiGateway(grpc::CreateChannel(server_->address(),
                                          grpc::InsecureChannelCredentials()),
                      allow_writes);
  }

  fs::path dir_;
  std::unique_ptr<CoordinatorServer> server_;
};

TEST_F(ApiGatewayTest, ReadsAnswerAsJson) {
  Start(false);
  const HttpReply reply = Gateway(false).Call("ListSweeps", {}, "", "");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.content_type, "application/json");
  EXPECT_THAT(reply.body, HasSubstr("\"sweeps\":[]"));
}

TEST_F(ApiGatewayTest, ErrorsKeepTheServicesWordsWithAnHttpStatus) {
  Start(false);
  const HttpReply missing =
      Gateway(false).Call("GetSweep", {{"sweep_id", "42"}}, "", "");
  EXPECT_EQ(missing.status, 404);
  EXPECT_THAT(missing.body, HasSubstr("\"code\": \"NOT_FOUND\""));
  const HttpReply unknown = Gateway(false).Call("DropTables", {}, "", "");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_THAT(unknown.body, HasSubstr("not a method of the public API"));
}

TEST_F(ApiGatewayTest, WritesNeedTheFlag) {
  Start(false);
  const HttpReply refused = Gateway(false).Call("SubmitSweep", {}, kSpec, "");
  EXPECT_EQ(refused.status, 403);
  EXPECT_THAT(refused.body, HasSubstr("--http_allow_writes"));
  const HttpReply allowed = Gateway(true).Call("SubmitSweep", {}, kSpec, "");
  EXPECT_EQ(allowed.status, 200) << allowed.body;
  EXPECT_THAT(allowed.body, HasSubstr("\"sweep_id\":\"1\""));
}

TEST_F(ApiGatewayTest, BearerTokensArePassedToTheService) {
  Start(true);
  ApiGateway gateway = Gateway(true);
  EXPECT_EQ(gateway.Call("ListSweeps", {}, "", "").status, 401);
  EXPECT_EQ(
      gateway.Call("ListSweeps", {}, "", "Bearer read-token-0123456789").status,
      200);
  EXPECT_EQ(
      gateway.Call("SubmitSweep", {}, kSpec, "Bearer read-token-0123456789")
          .status,
      403);
  EXPECT_EQ(
      gateway.Call("SubmitSweep", {}, kSpec, "Bearer write-token-0123456789")
          .status,
      200);
}

TEST_F(ApiGatewayTest, WatchStreamsEventsUntilTheSweepEnds) {
  Start(false);
  ApiGateway gateway = Gateway(true);
  ASSERT_EQ(gateway.Call("SubmitSweep", {}, kSpec, "").status, 200);
  ASSERT_EQ(gateway.Call("CancelSweep", {{"sweep_id", "1"}}, "", "").status,
            200);
  std::vector<std::string> events;
  const HttpReply end =
      gateway.Watch({{"sweep_id", "1"}}, "", "", [&](const std::string& json) {
        events.push_back(json);
        return true;
      });
  EXPECT_EQ(end.status, 200) << end.body;
  ASSERT_FALSE(events.empty());
  EXPECT_THAT(events.back(), HasSubstr("\"state\":\"ABORTED\""));
}

}  // namespace
}  // namespace moetune::coordinator::http
