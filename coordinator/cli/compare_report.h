// `moetune compare`'s report in each format: a table and a Markdown page to
// read (percent changes, rounded figures), CSV and JSON for programs (raw
// numbers; change and efficiency as fractions). Pure.
#pragma once

#include <ostream>
#include <string>

#include "coordinator/cli/compare.h"
#include "coordinator/cli/table.h"
#include "proto/moetune.pb.h"

namespace moetune::cli {

struct ReportHeader {
  v1::Sweep baseline;
  v1::Sweep target;
  bool across_builds = false;
  double threshold_pct = -1;
};

// `wide` is for --format table: every column; otherwise the tables keep to
// 120 columns (medians without intervals, no device or efficiencies).
// Markdown always has every column.
void PrintComparison(std::ostream& out, const ReportHeader& header,
                     const ComparisonReport& report, OutputFormat format,
                     bool wide = true);

// The per-config rows as a table (machine columns for CSV).
Table ComparisonTable(const ComparisonReport& report, OutputFormat format);

}  // namespace moetune::cli
