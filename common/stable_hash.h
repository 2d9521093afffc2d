// Fnv1a64: the project's one stable 64-bit string hash (FNV-1a). Used where a
// digest must be identical across runs, machines and standard libraries
// (std::hash is not): workload hashes, fingerprint hashes, seed mixing.
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace moetune {

inline uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a 64-bit offset basis
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;  // FNV 64-bit prime
  }
  return hash;
}

}  // namespace moetune
