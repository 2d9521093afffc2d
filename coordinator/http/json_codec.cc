#include "coordinator/http/json_codec.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/strict_json.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"

namespace moetune::coordinator::http {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::util::JsonParseOptions;
using google::protobuf::util::JsonStringToMessage;

std::string AllowedParameters(const Descriptor& type) {
  std::vector<std::string> names;
  for (int i = 0; i < type.field_count(); ++i) {
    const FieldDescriptor* field = type.field(i);
    if (!field->is_repeated() &&
        field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
      names.push_back(field->name());
    }
  }
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

// One parameter as a JSON member: strings, enums and numbers as JSON
// strings (the mapping accepts quoted numbers, and the parser then checks
// the range), booleans bare.
absl::StatusOr<std::string> JsonMember(const FieldDescriptor& field,
                                       const std::string& value) {
  std::string quoted;
  absl::StrAppend(&quoted, "\"", JsonEscape(value), "\"");
  if (field.cpp_type() != FieldDescriptor::CPPTYPE_BOOL) {
    return absl::StrCat("\"", field.name(), "\": ", quoted);
  }
  const std::string lower = absl::AsciiStrToLower(value);
  if (lower != "true" && lower != "false") {
    return absl::InvalidArgumentError(absl::StrCat(
        field.name(), ": '", value, "' is not allowed; allowed: true, false"));
  }
  return absl::StrCat("\"", field.name(), "\": ", lower);
}

absl::Status ParseInto(absl::string_view json, absl::string_view what,
                       google::protobuf::Message* request) {
  if (absl::Status strict = CheckStrictJson(json); !strict.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": not a ", request->GetDescriptor()->full_name(),
                     ": ", strict.message()));
  }
  JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = JsonStringToMessage(std::string(json), request, options);
  if (status.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": not a ", request->GetDescriptor()->full_name(),
                   " in protobuf's JSON mapping: ", status.ToString()));
}

}  // namespace

std::string JsonEscape(absl::string_view text) {
  std::string escaped;
  for (const char c : text) {
    if (c == '"' || c == '\\') escaped.push_back('\\');
    escaped.push_back(static_cast<unsigned char>(c) < 0x20 ? ' ' : c);
  }
  return escaped;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  // Printing a valid message cannot fail.
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

absl::Status FillRequest(const QueryParams& params, absl::string_view body,
                         google::protobuf::Message* request) {
  if (!absl::StripAsciiWhitespace(body).empty()) {
    if (absl::Status status = ParseInto(body, "body", request); !status.ok()) {
      return status;
    }
  }
  const Descriptor& type = *request->GetDescriptor();
  std::vector<std::string> members;
  for (const auto& [name, value] : params) {
    const FieldDescriptor* field = type.FindFieldByName(name);
    if (field == nullptr) field = type.FindFieldByCamelcaseName(name);
    if (field == nullptr || field->is_repeated() ||
        field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": not a query parameter of ", type.full_name(),
                       "; allowed: ", AllowedParameters(type),
                       " (anything else goes in a JSON body with POST)"));
    }
    absl::StatusOr<std::string> member = JsonMember(*field, value);
    if (!member.ok()) return member.status();
    members.push_back(*std::move(member));
  }
  if (members.empty()) return absl::OkStatus();
  // Merged over the body's fields: the URL wins.
  std::unique_ptr<google::protobuf::Message> from_query(request->New());
  if (absl::Status status =
          ParseInto(absl::StrCat("{", absl::StrJoin(members, ", "), "}"),
                    "query parameters", from_query.get());
      !status.ok()) {
    return status;
  }
  request->MergeFrom(*from_query);
  return absl::OkStatus();
}

}  // namespace moetune::coordinator::http
