#include "coordinator/auth.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "coordinator/identity.h"

namespace moetune::coordinator {
namespace {

int Bit(Role role) { return 1 << static_cast<int>(role); }

// The roles a line's role name grants; 0 for an unknown name.
int RolesOf(const std::string& name) {
  if (name == "read") return Bit(Role::kRead);
  if (name == "write") return Bit(Role::kRead) | Bit(Role::kWrite);
  if (name == "worker") return Bit(Role::kWorker);
  return 0;
}

const char* RoleName(Role role) {
  switch (role) {
    case Role::kRead:
      return "read";
    case Role::kWrite:
      return "write";
    case Role::kWorker:
      return "worker";
  }
  return "?";
}

}  // namespace

absl::StatusOr<Authorizer> Authorizer::Load(const std::string& tokens_file) {
  std::ifstream in(tokens_file);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokens_file: cannot read '", tokens_file, "'"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), tokens_file);
}

absl::StatusOr<Authorizer> Authorizer::Parse(const std::string& text,
                                             const std::string& source) {
  Authorizer auth;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const std::vector<std::string> words =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    const int roles = words.size() == 2 ? RolesOf(words[0]) : 0;
    if (roles == 0 || words[1].size() < 16) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ":", number,
          ": allowed: \"ROLE TOKEN\" with ROLE read, write or worker and a "
          "token of at least 16 characters"));
    }
    auth.roles_[TokenDigest(words[1])] |= roles;
  }
  if (auth.roles_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no tokens; allowed: lines \"ROLE TOKEN\""));
  }
  return auth;
}

absl::Status Authorizer::CheckToken(const std::string& token, Role role) const {
  if (!enabled()) return absl::OkStatus();
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "no bearer token; send \"authorization: Bearer TOKEN\"");
  }
  auto it = roles_.find(TokenDigest(token));
  if (it == roles_.end()) {
    return absl::UnauthenticatedError("unknown bearer token");
  }
  if ((it->second & Bit(role)) == 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("this token does not hold the '", RoleName(role),
                     "' role this call needs"));
  }
  return absl::OkStatus();
}

absl::Status Authorizer::Check(const grpc::ServerContext& context,
                               Role role) const {
  if (!enabled()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  std::string token;
  if (it != metadata.end()) {
    const absl::string_view value(it->second.data(), it->second.size());
    if (absl::StartsWithIgnoreCase(value, "bearer ")) {
      token = std::string(absl::StripAsciiWhitespace(value.substr(7)));
    }
  }
  return CheckToken(token, role);
}

}  // namespace moetune::coordinator
