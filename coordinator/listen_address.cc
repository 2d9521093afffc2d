#include "coordinator/listen_address.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace moetune::coordinator {

absl::Status CheckListenAddress(const std::string& address,
                                const std::string& flag) {
  const size_t colon = address.rfind(':');
  const std::string port =
      colon == std::string::npos ? "" : address.substr(colon + 1);
  const std::string host =
      colon == std::string::npos ? "" : address.substr(0, colon);
  bool digits = !port.empty() && port.size() <= 5;
  for (char c : port) digits = digits && absl::ascii_isdigit(c);
  int value = -1;
  if (host.empty() || !digits || !absl::SimpleAtoi(port, &value) ||
      value > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": '", address,
        "' is not allowed; allowed: host:port with a port in 0..65535 (0 = "
        "any free port), e.g. 127.0.0.1:50051 or [::]:50051"));
  }
  return absl::OkStatus();
}

}  // namespace moetune::coordinator
