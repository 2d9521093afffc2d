#include "worker/frames.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace moetune::worker {
namespace {

constexpr size_t kHeaderBytes = 4;

uint32_t DecodeLength(const char* header) {
  uint32_t n = 0;
  for (int i = kHeaderBytes - 1; i >= 0; --i) {
    n = (n << 8) | static_cast<uint8_t>(header[i]);
  }
  return n;
}

// Reads exactly n bytes; false at end of file or on an error.
bool ReadExactly(int fd, char* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = read(fd, out + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

std::string EncodeFrame(const std::string& payload) {
  std::string frame(kHeaderBytes, '\0');
  const uint32_t n = static_cast<uint32_t>(payload.size());
  for (size_t i = 0; i < kHeaderBytes; ++i) {
    frame[i] = static_cast<char>((n >> (8 * i)) & 0xffu);
  }
  return frame + payload;
}

std::optional<std::string> TakeFrame(std::string* buffer, bool* corrupt) {
  *corrupt = false;
  if (buffer->size() < kHeaderBytes) return std::nullopt;
  const size_t n = DecodeLength(buffer->data());
  if (n > kMaxFrameBytes) {
    *corrupt = true;
    return std::nullopt;
  }
  if (buffer->size() < kHeaderBytes + n) return std::nullopt;
  std::string payload = buffer->substr(kHeaderBytes, n);
  buffer->erase(0, kHeaderBytes + n);
  return payload;
}

bool ReadFrame(int fd, std::string* payload) {
  char header[kHeaderBytes];
  if (!ReadExactly(fd, header, kHeaderBytes)) return false;
  const size_t n = DecodeLength(header);
  if (n > kMaxFrameBytes) return false;
  payload->resize(n);
  return n == 0 || ReadExactly(fd, payload->data(), n);
}

bool WriteAll(int fd, const std::string& bytes) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace moetune::worker
