// Bounds on the text a client sends: every string field of a request has a
// maximum length (names kMaxNameBytes, other text kMaxTextBytes), checked
// before it is stored, and holds printable UTF-8 only (no control
// characters, no bidirectional overrides), so that a name can neither fill
// a listing past the message limit nor rewrite a terminal that prints it.
// EscapeForTerminal makes text that was stored before these bounds safe to
// print. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace moetune {

inline constexpr size_t kMaxNameBytes = 256;
inline constexpr size_t kMaxTextBytes = 4096;

// OK when `value` is valid UTF-8 of at most `max_bytes` bytes with no
// control character (C0, DEL, C1) and no bidirectional control (U+202A-202E,
// U+2066-2069, U+200E, U+200F); INVALID_ARGUMENT naming `field` otherwise.
absl::Status CheckPrintable(absl::string_view value, absl::string_view field,
                            size_t max_bytes);

// CheckPrintable over every string field of `message`, recursively (bytes
// fields are data and are not checked): fields named "name", "*_name" and
// "request_id" at kMaxNameBytes, the rest at kMaxTextBytes. Errors name the
// field's path from `path`, e.g. "spec.name" or "space.moe_backends[2]".
absl::Status CheckMessageText(const google::protobuf::Message& message,
                              absl::string_view path);

// `text` with every byte CheckPrintable would refuse written as \xNN (a
// bidirectional control as \u202E), and invalid UTF-8 likewise.
std::string EscapeForTerminal(absl::string_view text);

}  // namespace moetune
