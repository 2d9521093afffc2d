// JSON text in a stable order. protobuf's JSON mapping prints a Struct's
// keys in hash order, so the same report or export came out shuffled from
// run to run (bad for a file a CI job diffs or a launcher config kept in a
// repository) and log lines put the message anywhere. These print
// google::protobuf::Value trees with the keys sorted (keys that are numbers,
// like batch sizes, in numeric order), leaving escaping and number
// formatting to protobuf. Pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "google/protobuf/struct.pb.h"

namespace moetune {

// `value` as JSON; indent < 0 prints it on one line, otherwise nested
// objects and lists are indented by `indent` spaces a level.
std::string JsonText(const google::protobuf::Value& value, int indent = 1);

// A JSON string literal.
std::string JsonString(absl::string_view text);

// One line: an object with the fields in the order given.
std::string JsonObjectLine(
    const std::vector<std::pair<std::string, google::protobuf::Value>>& fields);

}  // namespace moetune
