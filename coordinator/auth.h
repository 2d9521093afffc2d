// Who may call what. Bearer tokens with roles, from a file of lines
// "ROLE TOKEN" ('#' starts a comment): `read` (the public API's queries),
// `write` (read, plus SubmitSweep and CancelSweep) and `worker` (the
// WorkerControl service). A call names its token in the "authorization:
// Bearer TOKEN" metadata. Without a tokens file every call is allowed (a
// coordinator on loopback or a trusted network); with one, a call without a
// known token is UNAUTHENTICATED and one whose token lacks the role
// PERMISSION_DENIED. Only SHA-256 digests of the tokens are kept.
// Immutable after Load; thread-safe.
#pragma once

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"

namespace moetune::coordinator {

enum class Role { kRead, kWrite, kWorker };

class Authorizer {
 public:
  // Every call allowed.
  Authorizer() = default;
  // INVALID_ARGUMENT naming the file and line for a malformed one.
  static absl::StatusOr<Authorizer> Load(const std::string& tokens_file);
  // From text in the file's format (tests).
  static absl::StatusOr<Authorizer> Parse(const std::string& text,
                                          const std::string& source);

  bool enabled() const { return !roles_.empty(); }
  absl::Status Check(const grpc::ServerContext& context, Role role) const;
  // The same for a bearer token given directly ("" = none).
  absl::Status CheckToken(const std::string& token, Role role) const;

 private:
  // Token digest -> the roles it holds (bit 1 << Role).
  std::map<std::string, int> roles_;
};

}  // namespace moetune::coordinator
