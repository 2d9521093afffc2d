// Table: rows of strings printed as an aligned text table or as CSV (JSON
// output prints the API's messages instead). Plain value type.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace moetune::cli {

enum class OutputFormat { kTable, kCsv, kJson };

// "table", "csv" or "json"; false for anything else.
bool ParseOutputFormat(const std::string& text, OutputFormat* format);

struct Table {
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
  void Print(std::ostream& out, OutputFormat format) const;
};

// Compact number formatting for table cells.
std::string FormatDouble(double value, int precision = 1);

}  // namespace moetune::cli
