// Reading a kernel timeline CSV (WriteSpansCsv's format) back, for tests and
// for summarising a recorded timeline again. Apart from kernel_timeline.h
// because it returns absl::Status, and the CUPTI injection library, built on
// a GPU machine without abseil, only writes.
#pragma once

#include <istream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/profiling/kernel_timeline.h"

namespace moetune::profiling {

// The spans of a CSV with kSpansCsvHeader as its first line, in file order.
// InvalidArgument names the line of a missing header, a field that is not
// an unsigned number in range, or an end before its start. Blank lines and
// a '\r' before each line break are accepted.
absl::StatusOr<std::vector<KernelSpan>> ReadSpansCsv(std::istream& in);

// The same from a file; NotFound when it cannot be opened.
absl::StatusOr<std::vector<KernelSpan>> ReadSpansCsvFile(
    const std::string& path);

}  // namespace moetune::profiling
