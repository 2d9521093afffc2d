// Length-prefixed frames: how a warm trial process and its worker exchange
// requests and replies over a pipe (4-byte little-endian length, then the
// bytes). Pure functions and blocking fd helpers; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace moetune::worker {

// Frames larger than this are refused as corrupt (a TrialResult with its
// samples is a few hundred KB at most).
inline constexpr size_t kMaxFrameBytes = 256u << 20;

std::string EncodeFrame(const std::string& payload);

// The first whole frame's payload taken off the front of *buffer, or
// nullopt while it is incomplete. *corrupt is set (and nullopt returned)
// when the length exceeds kMaxFrameBytes.
std::optional<std::string> TakeFrame(std::string* buffer, bool* corrupt);

// Blocking: reads one frame from fd into *payload; false at end of file
// before a whole frame (or on a read error or a corrupt length).
bool ReadFrame(int fd, std::string* payload);

// Blocking: writes all of bytes to fd; false on an error.
bool WriteAll(int fd, const std::string& bytes);

}  // namespace moetune::worker
