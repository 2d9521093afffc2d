#include "coordinator/http/rpc_metrics_interceptor.h"

#include <string>

namespace moetune::coordinator::http {
namespace {

using grpc::experimental::InterceptionHookPoints;

constexpr const char* kCodeNames[] = {"OK",
                                      "CANCELLED",
                                      "UNKNOWN",
                                      "INVALID_ARGUMENT",
                                      "DEADLINE_EXCEEDED",
                                      "NOT_FOUND",
                                      "ALREADY_EXISTS",
                                      "PERMISSION_DENIED",
                                      "RESOURCE_EXHAUSTED",
                                      "FAILED_PRECONDITION",
                                      "ABORTED",
                                      "OUT_OF_RANGE",
                                      "UNIMPLEMENTED",
                                      "INTERNAL",
                                      "UNAVAILABLE",
                                      "DATA_LOSS",
                                      "UNAUTHENTICATED"};

// Times from the call's creation (its metadata arrived) to the status being
// sent: the server's share of the latency.
class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(std::string method, CoordinatorMetrics* metrics,
                        const Clock* clock)
      : method_(std::move(method)),
        metrics_(metrics),
        clock_(clock),
        start_ns_(clock->MonotonicNs()) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      const int code = static_cast<int>(methods->GetSendStatus().error_code());
      const double seconds = (clock_->MonotonicNs() - start_ns_) * 1e-9;
      metrics_->ObserveRpc(
          method_, code >= 0 && code <= 16 ? kCodeNames[code] : "UNKNOWN",
          seconds);
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  CoordinatorMetrics* metrics_;
  const Clock* clock_;
  const int64_t start_ns_;
};

}  // namespace

grpc::experimental::Interceptor*
RpcMetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (info->type() != grpc::experimental::ServerRpcInfo::Type::UNARY ||
      info->method() == nullptr) {
    return nullptr;
  }
  return new RpcMetricsInterceptor(info->method(), metrics_, clock_);
}

}  // namespace moetune::coordinator::http
