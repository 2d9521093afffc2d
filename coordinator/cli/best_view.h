// `moetune best` in each format: an explanation to read (winner, runner-up,
// margin, ties, fingerprint, the rule that decided, exclusions), or one CSV
// row per workload and role (best, runner_up) with raw numbers. Pure.
#pragma once

#include <ostream>

#include "coordinator/cli/table.h"
#include "proto/moetune.pb.h"

namespace moetune::cli {

void PrintBest(std::ostream& out, const v1::GetBestResponse& best);
Table BestTable(const v1::GetBestResponse& best);

}  // namespace moetune::cli
