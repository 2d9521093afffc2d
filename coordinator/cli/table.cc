#include "coordinator/cli/table.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "common/text_bounds.h"

namespace moetune::cli {
namespace {

std::string CsvCell(const std::string& cell) {
  if (cell.find_first_of(",\"\n") == std::string::npos) return cell;
  return "\"" + absl::StrReplaceAll(cell, {{"\"", "\"\""}}) + "\"";
}

// Cuts the last cell of each row so that the lines keep to max_width.
void CutLastColumn(Table& table) {
  if (table.max_width == 0 || table.headers.empty()) return;
  const size_t last = table.headers.size() - 1;
  size_t before = 0;  // the columns before the last, with their separators
  for (size_t c = 0; c < last; ++c) {
    size_t width = table.headers[c].size();
    for (const auto& row : table.rows) {
      if (c < row.size()) width = std::max(width, row[c].size());
    }
    before += width + 2;
  }
  const size_t room =
      std::max(Table::kMinLastColumn,
               table.max_width > before ? table.max_width - before : 0);
  for (auto& row : table.rows) {
    if (row.size() > last && row[last].size() > room) {
      row[last] = row[last].substr(0, room - 3) + "...";
    }
  }
}

void PrintAligned(std::ostream& out, Table table) {
  CutLastColumn(table);
  std::vector<size_t> widths(table.headers.size(), 0);
  for (size_t c = 0; c < table.headers.size(); ++c) {
    widths[c] = table.headers[c].size();
    for (const auto& row : table.rows) {
      if (c < row.size()) widths[c] = std::max(widths[c], row[c].size());
    }
  }
  const auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < widths.size(); ++c) {
      const std::string cell = c < row.size() ? row[c] : "";
      line +=
          cell + std::string(widths[c] - std::min(widths[c], cell.size()), ' ');
      if (c + 1 < widths.size()) line += "  ";
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << "\n";
  };
  print_row(table.headers);
  for (const auto& row : table.rows) print_row(row);
}

// A GitHub-flavoured Markdown table ('|' in cells escaped).
void PrintMarkdown(std::ostream& out, const Table& table) {
  const auto md_row = [](const std::vector<std::string>& row) {
    std::vector<std::string> cells;
    for (const std::string& cell : row) {
      cells.push_back(absl::StrReplaceAll(cell, {{"|", "\\|"}, {"\n", " "}}));
    }
    return "| " + absl::StrJoin(cells, " | ") + " |";
  };
  out << md_row(table.headers) << "\n|";
  for (size_t c = 0; c < table.headers.size(); ++c) out << " --- |";
  out << "\n";
  for (const auto& row : table.rows) out << md_row(row) << "\n";
}

}  // namespace

bool ParseOutputFormat(const std::string& text, OutputFormat* format) {
  if (text == "table")
    *format = OutputFormat::kTable;
  else if (text == "csv")
    *format = OutputFormat::kCsv;
  else if (text == "json")
    *format = OutputFormat::kJson;
  else if (text == "markdown")
    *format = OutputFormat::kMarkdown;
  else
    return false;
  return true;
}

const char* FormatName(OutputFormat format) {
  switch (format) {
    case OutputFormat::kTable:
      return "table";
    case OutputFormat::kCsv:
      return "csv";
    case OutputFormat::kJson:
      return "json";
    case OutputFormat::kMarkdown:
      return "markdown";
  }
  return "?";
}

void Table::Print(std::ostream& out, OutputFormat format) const {
  if (format != OutputFormat::kCsv) {
    // For a terminal or a report: text stored before names were bounded
    // (control characters, bidirectional overrides) is shown escaped.
    Table shown = *this;
    for (auto& row : shown.rows) {
      for (std::string& cell : row) cell = EscapeForTerminal(cell);
    }
    if (format == OutputFormat::kMarkdown) {
      PrintMarkdown(out, shown);
    } else {
      PrintAligned(out, shown);
    }
    return;
  }
  const auto csv_row = [](const std::vector<std::string>& row) {
    std::vector<std::string> cells;
    for (const std::string& cell : row) cells.push_back(CsvCell(cell));
    return absl::StrJoin(cells, ",");
  };
  out << csv_row(headers) << "\n";
  for (const auto& row : rows) out << csv_row(row) << "\n";
}

Table Columns(const Table& table, const std::vector<std::string>& headers,
              const std::vector<std::pair<std::string, std::string>>& renamed) {
  std::vector<size_t> picked;
  Table narrow;
  narrow.max_width = table.max_width;
  for (const std::string& header : headers) {
    const auto it =
        std::find(table.headers.begin(), table.headers.end(), header);
    if (it == table.headers.end()) continue;
    picked.push_back(it - table.headers.begin());
    narrow.headers.push_back(header);
    for (const auto& [from, to] : renamed) {
      if (from == header) narrow.headers.back() = to;
    }
  }
  for (const auto& row : table.rows) {
    std::vector<std::string>& cells = narrow.rows.emplace_back();
    for (size_t c : picked) cells.push_back(c < row.size() ? row[c] : "");
  }
  return narrow;
}

std::string FormatDouble(double value, int precision) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return "inf";
  return absl::StrFormat("%.*f", precision, value);
}

std::string RawNumber(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto [end, error] =
      std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, end);
}

std::string UtcTime(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

}  // namespace moetune::cli
