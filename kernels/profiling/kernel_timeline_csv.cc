#include "kernels/profiling/kernel_timeline_csv.h"

#include <charconv>
#include <fstream>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

// abseil 20220623 (Debian 12) has its own string_view, which StrCat takes;
// std::string_views go in as std::strings.
namespace moetune::profiling {
namespace {

// Parses the unsigned number before the next ',' of `rest` into `value` and
// drops it and the comma from `rest`; false when there is none.
template <typename T>
bool TakeField(std::string_view& rest, T& value) {
  const size_t comma = rest.find(',');
  if (comma == std::string_view::npos || comma == 0) return false;
  const char* end = rest.data() + comma;
  const auto [ptr, error] = std::from_chars(rest.data(), end, value);
  if (error != std::errc() || ptr != end) return false;
  rest.remove_prefix(comma + 1);
  return true;
}

absl::StatusOr<KernelSpan> ParseLine(std::string_view line, int number) {
  KernelSpan span;
  std::string_view rest = line;
  if (!TakeField(rest, span.launch_id) || !TakeField(rest, span.graph_id) ||
      !TakeField(rest, span.start_ns) || !TakeField(rest, span.end_ns)) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", number,
                     ": want launch_id,graph_id,start_ns,end_ns,name with "
                     "unsigned numbers; got '",
                     std::string(line), "'"));
  }
  if (span.end_ns < span.start_ns) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", number, ": end_ns ", span.end_ns,
                     " before start_ns ", span.start_ns));
  }
  span.name = std::string(rest);
  return span;
}

std::string_view WithoutCarriageReturn(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace

absl::StatusOr<std::vector<KernelSpan>> ReadSpansCsv(std::istream& in) {
  std::string line;
  if (!std::getline(in, line) ||
      WithoutCarriageReturn(line) != kSpansCsvHeader) {
    return absl::InvalidArgumentError(absl::StrCat(
        "line 1: want the header '", std::string(kSpansCsvHeader), "'"));
  }
  std::vector<KernelSpan> spans;
  for (int number = 2; std::getline(in, line); ++number) {
    const std::string_view text = WithoutCarriageReturn(line);
    if (text.empty()) continue;
    absl::StatusOr<KernelSpan> span = ParseLine(text, number);
    if (!span.ok()) return span.status();
    spans.push_back(*std::move(span));
  }
  if (in.bad()) return absl::DataLossError("reading the CSV failed");
  return spans;
}

absl::StatusOr<std::vector<KernelSpan>> ReadSpansCsvFile(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  absl::StatusOr<std::vector<KernelSpan>> spans = ReadSpansCsv(in);
  if (!spans.ok()) {
    return absl::Status(spans.status().code(),
                        absl::StrCat(path, ": ", spans.status().message()));
  }
  return spans;
}

}  // namespace moetune::profiling
