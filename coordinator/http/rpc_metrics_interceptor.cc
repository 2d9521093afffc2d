#include "coordinator/http/rpc_metrics_interceptor.h"

#include <string>

#include "coordinator/http/grpc_code_name.h"

namespace moetune::coordinator::http {
namespace {

using grpc::experimental::InterceptionHookPoints;

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
      const double seconds = (clock_->MonotonicNs() - start_ns_) * 1e-9;
      metrics_->ObserveRpc(method_,
                           GrpcCodeName(methods->GetSendStatus().error_code()),
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
