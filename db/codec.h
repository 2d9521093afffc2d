// How values that SQLite has no type for are stored: raw timing samples as a
// blob of IEEE-754 doubles, and protobuf messages as serialized blobs.
//
// Thread-safety: pure functions; safe from any thread.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message_lite.h"

namespace moetune::db {

// 8 bytes per sample, the IEEE-754 bit pattern in little-endian order, so that
// a blob reads back bit-exactly on any host (NaN payloads and -0.0 included).
std::string EncodeSamples(std::span<const double> samples);
// The inverse of EncodeSamples; DATA_LOSS when the size is not a multiple of
// 8 bytes.
absl::StatusOr<std::vector<double>> DecodeSamples(std::string_view blob);

std::string SerializeMessage(const google::protobuf::MessageLite& message);
// DATA_LOSS naming `what` (e.g. "config of trial 7") when `bytes` does not
// parse as the message.
absl::Status ParseMessage(const std::string& bytes, std::string_view what,
                          google::protobuf::MessageLite* message);

}  // namespace moetune::db
