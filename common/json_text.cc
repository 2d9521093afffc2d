#include "common/json_text.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace moetune {
namespace {

using google::protobuf::Value;

bool IsNumber(const std::string& key) {
  return !key.empty() && key.size() < 18 &&
         std::all_of(key.begin(), key.end(),
                     [](char c) { return absl::ascii_isdigit(c); });
}

// Numeric keys first, in numeric order; then the rest alphabetically.
bool KeyBefore(const std::string& a, const std::string& b) {
  const bool na = IsNumber(a), nb = IsNumber(b);
  if (na != nb) return na;
  if (na) return std::stoll(a) < std::stoll(b);
  return a < b;
}

std::string Scalar(const Value& value) {
  std::string text;
  (void)google::protobuf::util::MessageToJsonString(value, &text);
  return text;
}

std::string Text(const Value& value, int indent, int depth) {
  const bool nested = value.has_struct_value() || value.has_list_value();
  if (!nested) return Scalar(value);
  const std::string pad =
      indent < 0 ? "" : "\n" + std::string(indent * (depth + 1), ' ');
  const std::string end =
      indent < 0 ? "" : "\n" + std::string(indent * depth, ' ');
  std::vector<std::string> items;
  if (value.has_list_value()) {
    for (const Value& item : value.list_value().values()) {
      items.push_back(Text(item, indent, depth + 1));
    }
  } else {
    std::vector<std::string> keys;
    for (const auto& [key, unused] : value.struct_value().fields()) {
      keys.push_back(key);
    }
    std::sort(keys.begin(), keys.end(), KeyBefore);
    for (const std::string& key : keys) {
      items.push_back(absl::StrCat(
          JsonString(key), indent < 0 ? ":" : ": ",
          Text(value.struct_value().fields().at(key), indent, depth + 1)));
    }
  }
  const char* open = value.has_list_value() ? "[" : "{";
  const char* close = value.has_list_value() ? "]" : "}";
  if (items.empty()) return absl::StrCat(open, close);
  std::string text = open;
  for (size_t i = 0; i < items.size(); ++i) {
    absl::StrAppend(&text, i == 0 ? "" : ",", pad, items[i]);
  }
  return absl::StrCat(text, end, close);
}

}  // namespace

std::string JsonText(const Value& value, int indent) {
  return Text(value, indent, 0);
}

std::string JsonString(absl::string_view text) {
  Value value;
  value.set_string_value(std::string(text));
  return Scalar(value);
}

std::string JsonObjectLine(
    const std::vector<std::pair<std::string, Value>>& fields) {
  std::string line = "{";
  for (size_t i = 0; i < fields.size(); ++i) {
    absl::StrAppend(&line, i == 0 ? "" : ",", JsonString(fields[i].first), ":",
                    JsonText(fields[i].second, -1));
  }
  return line + "}";
}

}  // namespace moetune
