#include "coordinator/http/api_gateway.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/http/grpc_code_name.h"
#include "coordinator/http/json_codec.h"

namespace moetune::coordinator::http {
namespace {

using v1::Moetune;

int HttpStatusFor(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return 200;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
      return 400;
    case grpc::StatusCode::UNAUTHENTICATED:
      return 401;
    case grpc::StatusCode::PERMISSION_DENIED:
      return 403;
    case grpc::StatusCode::NOT_FOUND:
      return 404;
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::ABORTED:
      return 409;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return 429;
    case grpc::StatusCode::UNIMPLEMENTED:
      return 501;
    case grpc::StatusCode::UNAVAILABLE:
      return 503;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return 504;
    default:
      return 500;
  }
}

// The request's bearer token travels on as gRPC metadata, so the service's
// own Authorizer decides, exactly as for a gRPC client.
void PassAuthorization(absl::string_view authorization,
                       grpc::ClientContext* context) {
  if (!authorization.empty()) {
    context->AddMetadata("authorization", std::string(authorization));
  }
}

HttpReply FromStatus(const absl::Status& status) {
  return ErrorReply(static_cast<grpc::StatusCode>(status.code()),
                    status.message());
}

// One unary method: request from the URL and body, call, response as JSON.
template <typename Request, typename Response>
auto UnaryMethod(grpc::Status (Moetune::Stub::*rpc)(grpc::ClientContext*,
                                                    const Request&,
                                                    Response*)) {
  return [rpc](Moetune::Stub& stub, grpc::ClientContext* context,
               const QueryParams& params, absl::string_view body) {
    Request request;
    if (absl::Status filled = FillRequest(params, body, &request);
        !filled.ok()) {
      return FromStatus(filled);
    }
    Response response;
    const grpc::Status status = (stub.*rpc)(context, request, &response);
    if (!status.ok()) {
      return ErrorReply(status.error_code(), status.error_message());
    }
    return HttpReply{200, "application/json", ToJson(response)};
  };
}

}  // namespace

HttpReply ErrorReply(grpc::StatusCode code, absl::string_view message) {
  const char* name = GrpcCodeName(code);
  return HttpReply{HttpStatusFor(code), "application/json",
                   absl::StrCat("{\"code\": \"", name, "\", \"message\": \"",
                                JsonEscape(message), "\"}")};
}

ApiGateway::ApiGateway(std::shared_ptr<grpc::Channel> channel,
                       bool allow_writes)
    : stub_(Moetune::NewStub(std::move(channel))), allow_writes_(allow_writes) {
  methods_["GetSweep"] = {false, UnaryMethod(&Moetune::Stub::GetSweep)};
  methods_["ListSweeps"] = {false, UnaryMethod(&Moetune::Stub::ListSweeps)};
  methods_["QueryTrials"] = {false, UnaryMethod(&Moetune::Stub::QueryTrials)};
  methods_["GetBest"] = {false, UnaryMethod(&Moetune::Stub::GetBest)};
  methods_["ListWorkers"] = {false, UnaryMethod(&Moetune::Stub::ListWorkers)};
  methods_["SubmitSweep"] = {true, UnaryMethod(&Moetune::Stub::SubmitSweep)};
  methods_["CancelSweep"] = {true, UnaryMethod(&Moetune::Stub::CancelSweep)};
}

bool ApiGateway::IsUnary(absl::string_view method) const {
  return methods_.find(method) != methods_.end();
}

HttpReply ApiGateway::Call(absl::string_view method, const QueryParams& params,
                           absl::string_view body,
                           absl::string_view authorization) const {
  const auto it = methods_.find(method);
  if (it == methods_.end()) {
    return ErrorReply(grpc::StatusCode::NOT_FOUND,
                      absl::StrCat(method,
                                   ": not a method of the public API "
                                   "(moetune.v1.Moetune)"));
  }
  if (it->second.writes && !allow_writes_) {
    return ErrorReply(
        grpc::StatusCode::PERMISSION_DENIED,
        absl::StrCat(method,
                     ": the HTTP API is read-only; start the coordinator "
                     "with --http_allow_writes, or call it over gRPC"));
  }
  grpc::ClientContext context;
  PassAuthorization(authorization, &context);
  return it->second.call(*stub_, &context, params, body);
}

HttpReply ApiGateway::Watch(const QueryParams& params, absl::string_view body,
                            absl::string_view authorization,
                            const std::function<bool(const std::string&)>& emit,
                            const std::function<bool()>& ping,
                            absl::Duration ping_interval) const {
  v1::WatchSweepRequest request;
  if (absl::Status filled = FillRequest(params, body, &request); !filled.ok()) {
    return FromStatus(filled);
  }
  grpc::ClientContext context;
  PassAuthorization(authorization, &context);
  std::unique_ptr<grpc::ClientReader<v1::SweepEvent>> reader =
      stub_->WatchSweep(&context, request);
  absl::Mutex mu;  // one writer to the client at a time
  bool ended = false;
  std::thread keep_alive([&] {
    absl::MutexLock lock(&mu);
    while (!mu.AwaitWithTimeout(absl::Condition(&ended), ping_interval)) {
      if (!ping()) {
        context.TryCancel();  // the client left: end the read below
        return;
      }
    }
  });
  v1::SweepEvent event;
  while (reader->Read(&event)) {
    absl::MutexLock lock(&mu);
    if (!emit(ToJson(event))) {
      context.TryCancel();
      break;
    }
  }
  {
    absl::MutexLock lock(&mu);
    ended = true;
  }
  keep_alive.join();
  const grpc::Status status = reader->Finish();
  if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    return ErrorReply(status.error_code(), status.error_message());
  }
  return HttpReply{};
}

}  // namespace moetune::coordinator::http
