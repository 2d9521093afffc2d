// The HTTP side's view of the API's messages: protobuf's JSON mapping (the
// same messages the gRPC API speaks, with proto field names, as the CLI's
// --format json prints them) and requests built from a URL's query
// parameters. Stateless; thread-safe.
#pragma once

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace moetune::coordinator::http {

// Query parameters as the HTTP library decoded them (name -> value).
using QueryParams = std::multimap<std::string, std::string>;

// The contents of a JSON string: quotes and backslashes escaped, control
// characters as spaces.
std::string JsonEscape(absl::string_view text);

// The message in the JSON mapping, every field printed (zeros too, so a
// dashboard needs no defaults of its own).
std::string ToJson(const google::protobuf::Message& message);

// Fills `request` from a JSON body (may be empty), then from the query
// parameters: each names a singular scalar or enum field of the request
// (proto or JSON name; enums by name), e.g. ?sweep_id=3&state=DONE.
// INVALID_ARGUMENT naming the parameter and, for an unknown one, the
// allowed names.
absl::Status FillRequest(const QueryParams& params, absl::string_view body,
                         google::protobuf::Message* request);

}  // namespace moetune::coordinator::http
