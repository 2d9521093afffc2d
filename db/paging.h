// Page tokens of the store's listings: "<kind><last id>.<remaining>", where
// the kind letter says which listing issued it and `remaining` carries what
// is left of the caller's overall limit (0 = none). Opaque to clients; a
// token of another kind or a malformed one is refused naming the field.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace moetune::db {

struct PageCursor {
  int64_t after = 0;      // the last id of the previous page (0 = start)
  int64_t remaining = 0;  // of the overall limit; 0 = no limit
};

// The page size to use: `requested`, or `default_size` for 0;
// INVALID_ARGUMENT naming `field` outside 0..max_size.
absl::StatusOr<int> PageSize(int requested, int default_size, int max_size,
                             const std::string& field);
// The cursor of `token` ("" = the first page, where `limit` starts).
absl::StatusOr<PageCursor> ParsePageToken(const std::string& token, char kind,
                                          const std::string& field, int limit);
std::string PageToken(char kind, int64_t last_id, int64_t remaining);

}  // namespace moetune::db
