// A gRPC server interceptor that times every unary call on the coordinator's
// listeners (and the HTTP API's, which goes through them) into
// CoordinatorMetrics' moetune_rpc_duration_seconds. Streaming calls
// (WatchSweep) are left out: their duration is the watch's, not a latency.
// The factory is shared by the listeners; each interceptor lives for one
// call. Thread-safe as CoordinatorMetrics and the Clock are.
#pragma once

#include "common/clock.h"
#include "coordinator/http/metrics.h"
#include "grpcpp/support/server_interceptor.h"

namespace moetune::coordinator::http {

class RpcMetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  RpcMetricsInterceptorFactory(CoordinatorMetrics* metrics, const Clock* clock)
      : metrics_(metrics), clock_(clock) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  CoordinatorMetrics* metrics_;
  const Clock* clock_;
};

}  // namespace moetune::coordinator::http
