// The dashboard page's static files: which file under the web root a URL
// path names, if any. Only plain files of the page's own kinds (html, js,
// css, svg, png, ico, json) whose path has no "." or ".." component and no
// hidden name, and whose real location (symbolic links resolved) stays
// under the root, are served: no directory traversal, no listing.
// Stateless; thread-safe.
#pragma once

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace moetune::coordinator::http {

struct StaticFile {
  std::filesystem::path path;
  std::string content_type;
};

// "/" is index.html. NOT_FOUND for anything not served (the reason is for
// the log, not for the client).
absl::StatusOr<StaticFile> ResolveStaticFile(const std::filesystem::path& root,
                                             absl::string_view url_path);

// The file's bytes; NOT_FOUND when it cannot be read.
absl::StatusOr<std::string> ReadStaticFile(const StaticFile& file);

}  // namespace moetune::coordinator::http
