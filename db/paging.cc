#include "db/paging.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace moetune::db {

absl::StatusOr<int> PageSize(int requested, int default_size, int max_size,
                             const std::string& field) {
  if (requested == 0) return default_size;
  if (requested > 0 && requested <= max_size) return requested;
  return absl::InvalidArgumentError(
      absl::StrCat(field, " is ", requested, "; allowed: 0 (default ",
                   default_size, ") or 1..", max_size));
}

absl::StatusOr<PageCursor> ParsePageToken(const std::string& token, char kind,
                                          const std::string& field, int limit) {
  if (token.empty()) return PageCursor{0, limit};
  const std::vector<std::string> parts =
      absl::StrSplit(token.size() > 1 ? token.substr(1) : "", '.');
  PageCursor cursor;
  if (token[0] != kind || parts.size() != 2 ||
      !absl::SimpleAtoi(parts[0], &cursor.after) ||
      !absl::SimpleAtoi(parts[1], &cursor.remaining) || cursor.after < 0 ||
      cursor.remaining < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": '", token,
        "' is not a page token of this listing; allowed: \"\" or the "
        "next_page_token of the previous page"));
  }
  return cursor;
}

std::string PageToken(char kind, int64_t last_id, int64_t remaining) {
  return absl::StrCat(std::string(1, kind), last_id, ".", remaining);
}

}  // namespace moetune::db
