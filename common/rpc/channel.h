// How a client (the CLI, a worker, a test) reaches a coordinator: plain or
// TLS (a CA to check the coordinator's certificate, and a client certificate
// for mutual TLS), a bearer token sent with every call, and a reconnect
// backoff short enough that a restarted coordinator is reached again well
// inside a worker's lease. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"

namespace moetune::rpc {

struct ChannelOptions {
  std::string tls_ca_file;    // non-empty: TLS, checking the server with it
  std::string tls_cert_file;  // with tls_key_file: a client certificate
  std::string tls_key_file;
  std::string token;  // "authorization: Bearer TOKEN" on every call
  int max_reconnect_backoff_ms = 1000;
};

// INVALID_ARGUMENT naming the flag for a file it cannot read.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const std::string& address, const ChannelOptions& options);

// The bearer token for a client: the first line of `token_file` when given,
// else the MOETUNE_TOKEN environment variable, else "".
absl::StatusOr<std::string> ReadToken(const std::string& token_file);

// The whole file, or INVALID_ARGUMENT naming `flag`.
absl::StatusOr<std::string> ReadFileForFlag(const std::string& path,
                                            const std::string& flag);

}  // namespace moetune::rpc
