// The HTTP API's calls against a real coordinator (in-process, loopback,
// port 0): the same answers and refusals as gRPC, read-only unless allowed,
// bearer tokens passed on.
#include "coordinator/http/api_gateway.h"

#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "coordinator/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/loopback_socket.h"

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

  void Start(bool tokens, HttpOptions http = {}) {
    ServerOptions options;
    options.http = http;
    // A sweep nobody runs stays running (its trials are not judged
    // unavailable within the test).
    options.scheduler.unavailable_grace_ms = 600000;
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
  const HttpReply end = gateway.Watch(
      {{"sweep_id", "1"}}, "", "",
      [&](const std::string& json) {
        events.push_back(json);
        return true;
      },
      [] { return true; }, absl::Seconds(5));
  EXPECT_EQ(end.status, 200) << end.body;
  ASSERT_FALSE(events.empty());
  EXPECT_THAT(events.back(), HasSubstr("\"state\":\"ABORTED\""));
}

// A client that left a sweep that is still running is noticed by the
// keep-alive ping and its stream ends within an interval, not with the
// sweep.
TEST_F(ApiGatewayTest, WatchEndsSoonAfterThePingFindsTheClientGone) {
  Start(false);
  ApiGateway gateway = Gateway(true);
  ASSERT_EQ(gateway.Call("SubmitSweep", {}, kSpec, "").status, 200);
  int pings = 0;
  const absl::Time start = absl::Now();
  const HttpReply end = gateway.Watch(
      {{"sweep_id", "1"}}, "", "", [](const std::string&) { return true; },
      [&] { return ++pings < 3; }, absl::Milliseconds(50));
  EXPECT_EQ(end.status, 200) << end.body;
  EXPECT_EQ(pings, 3);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

// A raw HTTP/1.1 connection that sends `request` and reads the status line.
struct RawClient {
  int fd = -1;
  std::string status_line;
};
RawClient Request(const std::string& address, const std::string& request) {
  RawClient c;
  c.fd = testing_util::ConnectLoopback(address);
  if (c.fd < 0 || send(c.fd, request.data(), request.size(), 0) < 0) {
    return c;
  }
  char ch;
  while (recv(c.fd, &ch, 1, 0) == 1 && ch != '\n') c.status_line += ch;
  return c;
}

// Streams are capped and get threads of their own: with 100 event streams
// asked for, the cap's worth stream, the rest get 503, and /healthz still
// answers at once. Clients that leave are reaped by the keep-alive ping, so
// their slots come back.
TEST_F(ApiGatewayTest, StreamsCannotHoldTheListenerHostage) {
  HttpOptions http;
  http.listen = "127.0.0.1:0";
  http.allow_writes = true;
  http.stream_ping = absl::Milliseconds(20);
  Start(false, http);
  ASSERT_EQ(Gateway(true).Call("SubmitSweep", {}, kSpec, "").status, 200);
  const std::string address = server_->http_address();
  const std::string watch =
      "GET /moetune.v1.Moetune/WatchSweep?sweep_id=1 HTTP/1.1\r\n"
      "Host: x\r\n\r\n";
  std::vector<RawClient> clients;
  int streaming = 0, refused = 0;
  for (int i = 0; i < 100; ++i) {
    clients.push_back(Request(address, watch));
    streaming += clients.back().status_line.rfind("HTTP/1.1 200", 0) == 0;
    refused += clients.back().status_line.rfind("HTTP/1.1 503", 0) == 0;
  }
  EXPECT_EQ(streaming, 64);
  EXPECT_EQ(refused, 36);
  const absl::Time asked = absl::Now();
  RawClient health =
      Request(address, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(health.status_line, HasSubstr("200"));
  EXPECT_LT(absl::Now() - asked, absl::Seconds(1));
  for (RawClient& c : clients) close(c.fd);
  close(health.fd);
  // The left streams' slots come back within a few pings.
  bool again = false;
  for (int tries = 0; tries < 50 && !again; ++tries) {
    absl::SleepFor(absl::Milliseconds(100));
    RawClient c = Request(address, watch);
    again = c.status_line.rfind("HTTP/1.1 200", 0) == 0;
    close(c.fd);
  }
  EXPECT_TRUE(again);
}

}  // namespace
}  // namespace moetune::coordinator::http
