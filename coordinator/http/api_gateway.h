// ApiGateway: the public API (moetune.v1.Moetune) for HTTP clients. A call
// POST or GET /moetune.v1.Moetune/METHOD carries the request as a JSON body
// and/or query parameters (json_codec.h) and is made through a gRPC channel
// to the coordinator's own service (in-process in production), so that it
// answers exactly as the gRPC API does: the same messages, the same bearer
// tokens and roles (the Authorization header is passed on), the same errors.
// Read-only unless constructed with allow_writes: SubmitSweep and
// CancelSweep are refused before they reach the service. WatchSweep streams
// its events one JSON message each (Server-Sent Events in http_server).
// Immutable after construction; thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "coordinator/http/json_codec.h"
#include "grpcpp/grpcpp.h"
#include "proto/moetune.grpc.pb.h"

namespace moetune::coordinator::http {

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

// The HTTP status for a gRPC code (Google's API mapping) and the JSON error
// body {"code": "NOT_FOUND", "message": "..."}.
HttpReply ErrorReply(grpc::StatusCode code, absl::string_view message);

class ApiGateway {
 public:
  ApiGateway(std::shared_ptr<grpc::Channel> channel, bool allow_writes);

  // True for a unary method of the public API.
  bool IsUnary(absl::string_view method) const;
  // One unary call. `authorization` is the request's header ("" = none).
  HttpReply Call(absl::string_view method, const QueryParams& params,
                 absl::string_view body, absl::string_view authorization) const;

  // WatchSweep: `emit` gets each event as JSON until the stream ends or the
  // client goes away (emit or ping returns false). Between events `ping` is
  // called every `ping_interval` (it writes a keep-alive the client
  // ignores), so that a client that left a quiet sweep is noticed and its
  // stream ended within one interval, not when the sweep ends. `emit` and
  // `ping` are never called at once. The returned reply is the error that
  // refused the watch, or 200 when it ended normally.
  HttpReply Watch(const QueryParams& params, absl::string_view body,
                  absl::string_view authorization,
                  const std::function<bool(const std::string&)>& emit,
                  const std::function<bool()>& ping,
                  absl::Duration ping_interval) const;

  bool allow_writes() const { return allow_writes_; }

 private:
  using Unary =
      std::function<HttpReply(v1::Moetune::Stub&, grpc::ClientContext*,
                              const QueryParams&, absl::string_view)>;
  struct Method {
    bool writes = false;
    Unary call;
  };

  std::unique_ptr<v1::Moetune::Stub> stub_;
  std::map<std::string, Method, std::less<>> methods_;
  const bool allow_writes_;
};

}  // namespace moetune::coordinator::http
