// The HTTP listener's own rules, without a coordinator behind it: refusals
// at start naming the flag, health, metrics and bounded request bodies.
#include "coordinator/http/http_server.h"

#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/loopback_socket.h"

namespace moetune::coordinator::http {
namespace {

using ::testing::HasSubstr;

class HttpServerTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options) {
    return HttpServer::Start(options, &gateway_, &metrics_, &auth_);
  }

  // Never called by these tests: nothing listens there.
  ApiGateway gateway_{
      grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()),
      false};
  CoordinatorMetrics metrics_;
  Authorizer auth_;
};

httplib::Client ClientFor(const std::string& address) {
  const size_t colon = address.rfind(':');
  return httplib::Client(address.substr(0, colon),
                         std::stoi(address.substr(colon + 1)));
}

TEST_F(HttpServerTest, RefusesABadAddressOrWebRootNamingTheFlag) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      Start({.listen = "localhost"});
  EXPECT_TRUE(absl::IsInvalidArgument(server.status()));
  EXPECT_THAT(server.status().message(), HasSubstr("--http_listen"));
  server = Start({.listen = "127.0.0.1:0", .web_root = "/no/such/dir"});
  EXPECT_TRUE(absl::IsInvalidArgument(server.status()));
  EXPECT_THAT(server.status().message(), HasSubstr("--web_root"));
}

TEST_F(HttpServerTest, APortInUseIsRefused) {
  absl::StatusOr<std::unique_ptr<HttpServer>> first =
      Start({.listen = "127.0.0.1:0"});
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<HttpServer>> second =
      Start({.listen = (*first)->address()});
  EXPECT_TRUE(absl::IsUnavailable(second.status()));
  EXPECT_THAT(second.status().message(), HasSubstr("cannot listen on"));
}

TEST_F(HttpServerTest, HealthMetricsAndBoundedBodies) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      Start({.listen = "127.0.0.1:0"});
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client = ClientFor((*server)->address());
  httplib::Result health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->body, "ok\n");
  httplib::Result metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("# TYPE moetune_queue_depth gauge"));
  httplib::Result big =
      client.Post("/moetune.v1.Moetune/ListSweeps", std::string(5 << 20, ' '),
                  "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  httplib::Result page = client.Get("/index.html");  // no web root: no page
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 404);
  (*server)->Stop();
  EXPECT_FALSE(client.Get("/healthz"));
}

// A chunked body (no Content-Length to refuse it by) is refused with 413 as
// soon as it passes the limit, not read to its end first: a client that
// keeps sending gets the answer while it sends.
TEST_F(HttpServerTest, AChunkedBodyOverTheLimitIs413WhileItIsSent) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      Start({.listen = "127.0.0.1:0"});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = (*server)->address();
  const int fd = testing_util::ConnectLoopback(address);
  ASSERT_GE(fd, 0);
  const std::string head =
      "POST /moetune.v1.Moetune/ListSweeps HTTP/1.1\r\nHost: x\r\n"
      "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  ASSERT_GT(send(fd, head.data(), head.size(), MSG_NOSIGNAL), 0);
  const std::string chunk = "10000\r\n" + std::string(0x10000, ' ') + "\r\n";
  std::string answer;
  size_t sent = 0;
  const auto read_available = [&](int flags) {
    char buffer[256];
    ssize_t n;
    while ((n = recv(fd, buffer, sizeof(buffer), flags)) > 0) {
      answer.append(buffer, n);
    }
  };
  while (sent < (1u << 30) && answer.empty()) {
    if (send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(chunk.size())) {
      break;  // the server closed its side
    }
    sent += chunk.size();
    read_available(MSG_DONTWAIT);
  }
  timeval wait{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  read_available(0);
  close(fd);
  EXPECT_THAT(answer, HasSubstr("HTTP/1.1 413"));
  EXPECT_LT(sent, 64u << 20);  // answered long before a gigabyte was sent
}

}  // namespace
}  // namespace moetune::coordinator::http
