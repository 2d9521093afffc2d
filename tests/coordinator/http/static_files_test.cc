// Static files: only the page's own files under the root, never a path out
// of it (dot components, hidden names, symbolic links), never a listing.
#include "coordinator/http/static_files.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace moetune::coordinator::http {
namespace {

namespace fs = std::filesystem;

class StaticFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() /
            ("static_files_" + std::to_string(getpid()));
    fs::remove_all(base_);
    root_ = base_ / "web";
    fs::create_directories(root_ / "vendor");
    std::ofstream(root_ / "index.html") << "<html>";
    std::ofstream(root_ / "vendor" / "chart.umd.js") << "chart";
    std::ofstream(root_ / ".secret.js") << "hidden";
    std::ofstream(root_ / "notes.txt") << "not a page file";
    std::ofstream(base_ / "outside.js") << "outside";
    fs::create_symlink(base_ / "outside.js", root_ / "link.js");
  }
  void TearDown() override { fs::remove_all(base_); }

  fs::path base_, root_;
};

TEST_F(StaticFilesTest, ServesThePageFilesWithTheirTypes) {
  absl::StatusOr<StaticFile> index = ResolveStaticFile(root_, "/");
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(*ReadStaticFile(*index), "<html>");
  absl::StatusOr<StaticFile> chart =
      ResolveStaticFile(root_, "/vendor/chart.umd.js");
  ASSERT_TRUE(chart.ok()) << chart.status();
  EXPECT_EQ(chart->content_type, "text/javascript; charset=utf-8");
}

TEST_F(StaticFilesTest, RefusesEverythingElse) {
  for (const char* path :
       {"/../outside.js", "/vendor/../../outside.js", "/./index.html",
        "//index.html", "/.secret.js", "/link.js", "/notes.txt", "/vendor",
        "/vendor/", "/missing.js", "index.html", "/a\\..\\outside.js"}) {
    absl::StatusOr<StaticFile> file = ResolveStaticFile(root_, path);
    EXPECT_TRUE(absl::IsNotFound(file.status())) << path;
  }
}

TEST_F(StaticFilesTest, NoRootServesNothing) {
  EXPECT_TRUE(absl::IsNotFound(
      ResolveStaticFile(base_ / "absent", "/index.html").status()));
}

}  // namespace
}  // namespace moetune::coordinator::http
