// A raw TCP connection to a test server on this host, for tests that must
// send what no client library would (a body that never ends, bytes that are
// not a request) or hold connections open by the hundred.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace moetune::testing_util {

// A socket connected to 127.0.0.1 at the port of `address` ("host:port"),
// or -1. The caller closes it.
inline int ConnectLoopback(const std::string& address) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(std::stoi(address.substr(address.rfind(':') + 1)));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd >= 0 &&
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace moetune::testing_util
