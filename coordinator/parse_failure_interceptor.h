// ParseFailureInterceptorFactory: a request the server cannot parse (bytes
// that are not the method's message, or a string field holding invalid
// UTF-8, which protobuf refuses) is answered INVALID_ARGUMENT saying so.
// gRPC itself answers it INTERNAL with an empty message, which reads as the
// coordinator's own fault. The service's handlers never answer INTERNAL
// without a message, so that pair identifies the library's parse failure.
// Thread-safe: one interceptor a call.
#pragma once

#include <grpcpp/support/server_interceptor.h>

namespace moetune::coordinator {

class ParseFailureInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;
};

}  // namespace moetune::coordinator
