// CheckStrictJson: JSON text as RFC 8259 writes it, checked before
// protobuf's JSON mapping reads it. protobuf's parser is lenient (it takes a
// trailing comma after the last member or element), and a spec file or a
// request body that some other tool would refuse must not be taken here.
// Also bounds the nesting depth. A pure function; thread-safe.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace moetune {

// Objects and arrays nested deeper than this are refused.
inline constexpr int kMaxJsonDepth = 64;

// OK for one JSON value (with white space around it); INVALID_ARGUMENT
// naming the line, the column and what was expected otherwise.
absl::Status CheckStrictJson(absl::string_view text);

}  // namespace moetune
