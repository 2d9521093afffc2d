// Table: rows of strings printed as an aligned text table or as CSV (JSON
// output prints the API's messages instead). Plain value type.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace moetune::cli {

// kMarkdown: `moetune compare` only (a report a CI job attaches).
enum class OutputFormat { kTable, kCsv, kJson, kMarkdown };

// "table", "csv", "json" or "markdown"; false for anything else.
bool ParseOutputFormat(const std::string& text, OutputFormat* format);
// The flag value that names `format`.
const char* FormatName(OutputFormat format);
// CSV and JSON are for programs: raw numbers, fractions, one value a cell.
inline bool IsMachineFormat(OutputFormat format) {
  return format == OutputFormat::kCsv || format == OutputFormat::kJson;
}

// The width text tables keep to unless --wide: they leave out their least
// important columns and cut their last one (a reason, a note).
inline constexpr size_t kNarrowWidth = 120;

struct Table {
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
  // Text format only, 0 for no limit: the last column's cells are cut (with
  // "...") so that lines keep to this width, but never to fewer than
  // kMinLastColumn characters.
  size_t max_width = 0;
  static constexpr size_t kMinLastColumn = 16;
  void Print(std::ostream& out, OutputFormat format) const;
};

// The named columns of `table`, in the order named (a table's narrow form);
// `renamed` gives some of them a shorter header.
Table Columns(
    const Table& table, const std::vector<std::string>& headers,
    const std::vector<std::pair<std::string, std::string>>& renamed = {});

// Compact number formatting for table cells.
std::string FormatDouble(double value, int precision = 1);
// The shortest text that reads back as exactly `value` (CSV cells).
std::string RawNumber(double value);
// "2026-12-01T13:49:06Z": UTC with the date, in every format.
std::string UtcTime(int64_t unix_ms);

}  // namespace moetune::cli
