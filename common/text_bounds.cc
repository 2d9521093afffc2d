#include "common/text_bounds.h"

#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"

namespace moetune {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// The code point at text[*i] (advancing *i), or -1 for invalid UTF-8 (one
// byte consumed).
int32_t NextCodePoint(absl::string_view text, size_t* i) {
  const auto byte = [&](size_t k) {
    return static_cast<unsigned char>(text[k]);
  };
  const unsigned char lead = byte(*i);
  int length = lead < 0x80           ? 1
               : (lead >> 5) == 0x6  ? 2
               : (lead >> 4) == 0xe  ? 3
               : (lead >> 3) == 0x1e ? 4
                                     : 0;
  if (length == 0 || *i + length > text.size()) {
    ++*i;
    return -1;
  }
  int32_t cp = length == 1 ? lead : lead & (0x7f >> length);
  for (int k = 1; k < length; ++k) {
    if ((byte(*i + k) & 0xc0) != 0x80) {
      ++*i;
      return -1;
    }
    cp = (cp << 6) | (byte(*i + k) & 0x3f);
  }
  static constexpr int32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[length] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    ++*i;
    return -1;
  }
  *i += length;
  return cp;
}

bool Refused(int32_t cp) {
  return cp < 0 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x200e ||
         cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

size_t MaxBytesOf(const FieldDescriptor& field) {
  const std::string& name = field.name();
  return name == "name" || absl::EndsWith(name, "_name") || name == "request_id"
             ? kMaxNameBytes
             : kMaxTextBytes;
}

absl::Status CheckField(const Message& message, const FieldDescriptor& field,
                        const std::string& path) {
  const Reflection& r = *message.GetReflection();
  const std::string at =
      path.empty() ? field.name() : absl::StrCat(path, ".", field.name());
  const bool text = field.type() == FieldDescriptor::TYPE_STRING;
  const bool nested = field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
  if (!text && !nested) return absl::OkStatus();
  if (!field.is_repeated()) {
    if (text)
      return CheckPrintable(r.GetString(message, &field), at,
                            MaxBytesOf(field));
    return CheckMessageText(r.GetMessage(message, &field), at);
  }
  for (int i = 0; i < r.FieldSize(message, &field); ++i) {
    const std::string item = absl::StrCat(at, "[", i, "]");
    absl::Status status =
        text ? CheckPrintable(r.GetRepeatedString(message, &field, i), item,
                              MaxBytesOf(field))
             : CheckMessageText(r.GetRepeatedMessage(message, &field, i), item);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckPrintable(absl::string_view value, absl::string_view field,
                            size_t max_bytes) {
  if (value.size() > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", value.size(), " bytes; at most ", max_bytes));
  }
  for (size_t i = 0; i < value.size();) {
    const size_t at = i;
    if (Refused(NextCodePoint(value, &i))) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": byte ", at,
          " is not printable text (control characters, bidirectional "
          "controls and invalid UTF-8 are refused)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckMessageText(const Message& message, absl::string_view path) {
  const google::protobuf::Descriptor& d = *message.GetDescriptor();
  const std::string prefix(path);
  for (int f = 0; f < d.field_count(); ++f) {
    absl::Status status = CheckField(message, *d.field(f), prefix);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

std::string EscapeForTerminal(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t at = i;
    const int32_t cp = NextCodePoint(text, &i);
    if (!Refused(cp)) {
      absl::StrAppend(&out, text.substr(at, i - at));
    } else if (cp >= 0x200e) {
      absl::StrAppendFormat(&out, "\\u%04X", cp);
    } else {
      for (size_t k = at; k < i; ++k) {
        absl::StrAppendFormat(&out, "\\x%02X",
                              static_cast<unsigned char>(text[k]));
      }
    }
  }
  return out;
}

}  // namespace moetune
