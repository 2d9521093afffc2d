// Checks a listening address before anything is opened: "host:port" with a
// numeric port in 0..65535 (0 = any free port), IPv6 hosts in brackets.
// Pure function; thread-safe.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace moetune::coordinator {

// OK, or INVALID_ARGUMENT naming `flag` and what is allowed.
absl::Status CheckListenAddress(const std::string& address,
                                const std::string& flag);

}  // namespace moetune::coordinator
