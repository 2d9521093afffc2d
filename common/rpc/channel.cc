#include "common/rpc/channel.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/client_interceptor.h"

namespace moetune::rpc {
namespace {

namespace ix = grpc::experimental;

// Adds the bearer token to every call's initial metadata.
class TokenInterceptor final : public ix::Interceptor {
 public:
  explicit TokenInterceptor(std::string header) : header_(std::move(header)) {}
  void Intercept(ix::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            ix::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", header_});
    }
    methods->Proceed();
  }

 private:
  std::string header_;
};

class TokenInterceptorFactory final
    : public ix::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string token)
      : header_("Bearer " + std::move(token)) {}
  ix::Interceptor* CreateClientInterceptor(ix::ClientRpcInfo*) override {
    return new TokenInterceptor(header_);
  }

 private:
  std::string header_;
};

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(
    const ChannelOptions& o) {
  if (o.tls_ca_file.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  absl::StatusOr<std::string> ca = ReadFileForFlag(o.tls_ca_file, "--tls_ca");
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *ca;
  if (!o.tls_cert_file.empty()) {
    absl::StatusOr<std::string> cert =
        ReadFileForFlag(o.tls_cert_file, "--tls_cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key =
        ReadFileForFlag(o.tls_key_file, "--tls_key");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::string> ReadFileForFlag(const std::string& path,
                                            const std::string& flag) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot read '", path, "'"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::string> ReadToken(const std::string& token_file) {
  if (token_file.empty()) {
    const char* env = std::getenv("MOETUNE_TOKEN");
    return std::string(env == nullptr ? "" : env);
  }
  absl::StatusOr<std::string> text =
      ReadFileForFlag(token_file, "--token_file");
  if (!text.ok()) return text.status();
  const std::string first = text->substr(0, text->find('\n'));
  return std::string(absl::StripAsciiWhitespace(first));
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const std::string& address, const ChannelOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      Credentials(options);
  if (!credentials.ok()) return credentials.status();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              options.max_reconnect_backoff_ms);
  std::vector<std::unique_ptr<ix::ClientInterceptorFactoryInterface>> factories;
  if (!options.token.empty()) {
    factories.push_back(
        std::make_unique<TokenInterceptorFactory>(options.token));
  }
  return ix::CreateCustomChannelWithInterceptors(address, *credentials, args,
                                                 std::move(factories));
}

}  // namespace moetune::rpc
