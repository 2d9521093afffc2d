#include "coordinator/parse_failure_interceptor.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace moetune::coordinator {
namespace {

using grpc::experimental::InterceptionHookPoints;

class ParseFailureInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit ParseFailureInterceptor(std::string method)
      : method_(std::move(method)) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status sent = methods->GetSendStatus();
      if (sent.error_code() == grpc::StatusCode::INTERNAL &&
          sent.error_message().empty()) {
        methods->ModifySendStatus(grpc::Status(
            grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat(method_,
                         ": the request could not be parsed (not this "
                         "method's message, or a string field that is not "
                         "valid UTF-8)")));
      }
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
};

}  // namespace

grpc::experimental::Interceptor*
ParseFailureInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new ParseFailureInterceptor(
      info->method() == nullptr ? "a call" : info->method());
}

}  // namespace moetune::coordinator
