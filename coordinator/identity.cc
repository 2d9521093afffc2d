#include "coordinator/identity.h"

#include <openssl/sha.h>
#include <sys/random.h>

#include <cstdint>
#include <cstring>

#include "absl/strings/escaping.h"

namespace moetune::coordinator {
namespace {

// n random bytes from getrandom(2), as lowercase hex.
std::string RandomHex(size_t n) {
  std::string bytes(n, '\0');
  size_t filled = 0;
  while (filled < n) {
    const ssize_t got = getrandom(bytes.data() + filled, n - filled, 0);
    if (got > 0) filled += static_cast<size_t>(got);
  }
  return absl::BytesToHexString(bytes);
}

}  // namespace

std::string NewWorkerId(const std::string& name) {
  return "w:" + name + "/" + RandomHex(4);
}

std::string NewToken() { return RandomHex(32); }

std::string TokenDigest(const std::string& token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(),
         digest);
  return absl::BytesToHexString(
      std::string(reinterpret_cast<const char*>(digest), SHA256_DIGEST_LENGTH));
}

bool SameDigest(const std::string& a, const std::string& b) {
  if (a.size() != b.size() || a.empty()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace moetune::coordinator
