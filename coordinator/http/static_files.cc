#include "coordinator/http/static_files.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace moetune::coordinator::http {
namespace {

namespace fs = std::filesystem;

constexpr std::pair<absl::string_view, absl::string_view> kTypes[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".json", "application/json"},
};

absl::StatusOr<std::string> ContentTypeOf(const fs::path& path) {
  const std::string extension = path.extension().string();
  for (const auto& [suffix, type] : kTypes) {
    if (extension == suffix) return std::string(type);
  }
  return absl::NotFoundError(
      absl::StrCat(path.string(), ": not a kind of file the page has"));
}

// The URL path's components, refusing any that could leave the root or
// reach a hidden file: "", ".", "..", names starting with '.', and
// backslashes or NULs (another platform's separators, truncation tricks).
absl::StatusOr<fs::path> RelativePath(absl::string_view url_path) {
  if (url_path.empty() || url_path == "/") return fs::path("index.html");
  if (url_path.front() != '/') {
    return absl::NotFoundError("the path does not start with /");
  }
  fs::path relative;
  for (absl::string_view part : absl::StrSplit(url_path.substr(1), '/')) {
    if (part.empty() || part.front() == '.' ||
        part.find_first_of(absl::string_view("\\\0", 2)) !=
            absl::string_view::npos) {
      return absl::NotFoundError(
          absl::StrCat(url_path, ": component '", part, "' is not served"));
    }
    relative /= std::string(part);
  }
  return relative;
}

}  // namespace

absl::StatusOr<StaticFile> ResolveStaticFile(const fs::path& root,
                                             absl::string_view url_path) {
  absl::StatusOr<fs::path> relative = RelativePath(url_path);
  if (!relative.ok()) return relative.status();
  absl::StatusOr<std::string> type = ContentTypeOf(*relative);
  if (!type.ok()) return type.status();
  std::error_code error;
  const fs::path real_root = fs::canonical(root, error);
  if (error) return absl::NotFoundError(root.string() + ": no web root");
  const fs::path real = fs::canonical(real_root / *relative, error);
  if (error || !fs::is_regular_file(real, error)) {
    return absl::NotFoundError(absl::StrCat(url_path, ": no such file"));
  }
  // A symbolic link inside the root may point anywhere: the resolved path
  // must still be under it.
  const auto [root_end, unused] = std::mismatch(
      real_root.begin(), real_root.end(), real.begin(), real.end());
  if (root_end != real_root.end()) {
    return absl::NotFoundError(absl::StrCat(url_path, ": outside the root"));
  }
  return StaticFile{real, *std::move(type)};
}

absl::StatusOr<std::string> ReadStaticFile(const StaticFile& file) {
  std::ifstream in(file.path, std::ios::binary);
  if (!in.is_open()) {
    return absl::NotFoundError(file.path.string() + ": cannot be read");
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace moetune::coordinator::http
