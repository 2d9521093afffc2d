#include "coordinator/http/process_stats.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace moetune::coordinator::http {
namespace {

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<double> ParseNumber(absl::string_view field,
                                   const std::string& what) {
  double value = 0;
  if (!absl::SimpleAtod(field, &value)) {
    return absl::DataLossError(
        absl::StrCat(what, ": not a number: '", field, "'"));
  }
  return value;
}

// The boot time (seconds since the epoch): the "btime" line of /proc/stat.
absl::StatusOr<double> BootTime(const std::string& stat_text) {
  for (absl::string_view line : absl::StrSplit(stat_text, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ")) {
      return ParseNumber(absl::StripAsciiWhitespace(line), "btime");
    }
  }
  return absl::DataLossError("/proc/stat has no btime line");
}

}  // namespace

absl::StatusOr<ProcessStats> ProcfsProcessStats::Read() {
  ProcessStats stats;
  ASSIGN_OR_RETURN(stats.start_time_seconds, StartTimeSeconds());
  ASSIGN_OR_RETURN(stats.resident_memory_bytes, ResidentBytes());
  ASSIGN_OR_RETURN(stats.open_fds, OpenFds());
  return stats;
}

// Field 22 of /proc/self/stat is the start time in clock ticks after boot;
// fields are counted after the command name, which is in parentheses and may
// itself hold spaces and parentheses (hence the last ')').
absl::StatusOr<double> ProcfsProcessStats::StartTimeSeconds() const {
  ASSIGN_OR_RETURN(const std::string stat, ReadText(proc_root_ + "/self/stat"));
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) {
    return absl::DataLossError("/proc/self/stat has no command name");
  }
  const std::vector<absl::string_view> fields = absl::StrSplit(
      absl::string_view(stat).substr(name_end + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (the state), so field 22 is fields[19].
  if (fields.size() < 20) {
    return absl::DataLossError("/proc/self/stat has too few fields");
  }
  ASSIGN_OR_RETURN(const double ticks, ParseNumber(fields[19], "starttime"));
  ASSIGN_OR_RETURN(const std::string boot, ReadText(proc_root_ + "/stat"));
  ASSIGN_OR_RETURN(const double boot_time, BootTime(boot));
  return boot_time + ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The second field of /proc/self/statm: resident pages.
absl::StatusOr<double> ProcfsProcessStats::ResidentBytes() const {
  ASSIGN_OR_RETURN(const std::string statm,
                   ReadText(proc_root_ + "/self/statm"));
  const std::vector<absl::string_view> fields =
      absl::StrSplit(statm, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  if (fields.size() < 2) {
    return absl::DataLossError("/proc/self/statm has too few fields");
  }
  ASSIGN_OR_RETURN(const double pages, ParseNumber(fields[1], "resident"));
  return pages * static_cast<double>(sysconf(_SC_PAGESIZE));
}

absl::StatusOr<double> ProcfsProcessStats::OpenFds() const {
  std::error_code error;
  std::filesystem::directory_iterator it(proc_root_ + "/self/fd", error);
  if (error) {
    return absl::NotFoundError(absl::StrCat("cannot list ", proc_root_,
                                            "/self/fd: ", error.message()));
  }
  double count = 0;
  // The iterator's own descriptor is among the entries: not one the process
  // holds otherwise, but the usual exporters count it too.
  for (; it != std::filesystem::directory_iterator(); it.increment(error)) {
    if (error) break;
    ++count;
  }
  return count;
}

}  // namespace moetune::coordinator::http
