// gRPC status codes by their canonical names ("OK", "NOT_FOUND", ...): what
// the HTTP gateway's error bodies and the RPC latency metric's label say.
#pragma once

#include <grpcpp/support/status.h>

namespace moetune::coordinator::http {

// "UNKNOWN" for a value outside the 17 codes.
const char* GrpcCodeName(grpc::StatusCode code);

}  // namespace moetune::coordinator::http
