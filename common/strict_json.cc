#include "common/strict_json.h"

#include <cctype>
#include <string>

#include "absl/strings/str_cat.h"

namespace moetune {
namespace {

// A recursive-descent reader that only checks; `error` holds the first
// problem.
class Checker {
 public:
  explicit Checker(absl::string_view text) : text_(text) {}

  absl::Status Run() {
    SkipSpace();
    Value(0);
    SkipSpace();
    if (error_.empty() && pos_ < text_.size()) Fail("the end of the text");
    if (error_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(error_);
  }

 private:
  bool Failed() const { return !error_.empty(); }

  void Fail(absl::string_view expected) {
    if (Failed()) return;
    int line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    const std::string found =
        pos_ < text_.size() ? absl::StrCat("'", text_.substr(pos_, 1), "'")
                            : "the end of the text";
    error_ = absl::StrCat("JSON line ", line, " column ", column, ": expected ",
                          expected, ", found ", found);
  }

  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
            text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Take(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void Value(int depth) {
    if (pos_ >= text_.size()) return Fail("a value");
    const char c = text_[pos_];
    if (c == '{' || c == '[') {
      if (depth >= kMaxJsonDepth) {
        return Fail(absl::StrCat("at most ", kMaxJsonDepth, " nested levels"));
      }
      return c == '{' ? Object(depth + 1) : Array(depth + 1);
    }
    if (c == '"') return String();
    if (c == '-' || (c >= '0' && c <= '9')) return Number();
    for (absl::string_view word : {"true", "false", "null"}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return;
      }
    }
    Fail("a value");
  }

  // Members or elements separated by commas, no comma before the close.
  template <typename Item>
  void Sequence(char close, absl::string_view what, Item item) {
    ++pos_;  // the opening bracket
    SkipSpace();
    if (Take(close)) return;
    while (!Failed()) {
      item();
      SkipSpace();
      if (Take(close)) return;
      if (!Take(','))
        return Fail(absl::StrCat("',' or '", std::string(1, close), "'"));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == close) {
        return Fail(absl::StrCat(what, " after ','"));
      }
    }
  }

  void Object(int depth) {
    Sequence('}', "a member", [&] {
      if (pos_ >= text_.size() || text_[pos_] != '"') return Fail("a name");
      String();
      SkipSpace();
      if (!Take(':')) return Fail("':'");
      SkipSpace();
      Value(depth);
    });
  }

  void Array(int depth) {
    Sequence(']', "a value", [&] { Value(depth); });
  }

  void String() {
    ++pos_;  // the opening quote
    while (pos_ < text_.size()) {
      const unsigned char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return;
      }
      if (c < 0x20) return Fail("a character, not a control byte");
      if (c == '\\') {
        ++pos_;
        if (pos_ >= text_.size()) break;
        const char e = text_[pos_];
        if (e == 'u') {
          for (int i = 1; i <= 4; ++i) {
            if (pos_ + i >= text_.size() ||
                !std::isxdigit(static_cast<unsigned char>(text_[pos_ + i]))) {
              pos_ += i;
              return Fail("four hex digits after \\u");
            }
          }
          pos_ += 4;
        } else if (std::string("\"\\/bfnrt").find(e) == std::string::npos) {
          return Fail("an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u)");
        }
      }
      ++pos_;
    }
    Fail("'\"'");
  }

  void Digits() {
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      ++pos_;
    }
    if (pos_ == start) Fail("a digit");
  }

  void Number() {
    Take('-');
    if (Take('0')) {
      if (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        return Fail("no leading zero");
      }
    } else {
      Digits();
    }
    if (Take('.')) Digits();
    if (Take('e') || Take('E')) {
      if (!Take('+')) Take('-');
      Digits();
    }
  }

  absl::string_view text_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace

absl::Status CheckStrictJson(absl::string_view text) {
  return Checker(text).Run();
}

}  // namespace moetune
