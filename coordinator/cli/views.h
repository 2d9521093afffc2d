// What the CLI shows: API messages turned into tables (and, for --format
// json, into protobuf JSON). The columns are documented in README.md.
// Pure functions.
#pragma once

#include <ostream>
#include <string>

#include "coordinator/cli/table.h"
#include "google/protobuf/message.h"
#include "proto/moetune.pb.h"

namespace moetune::cli {

Table TrialsTable(const v1::QueryTrialsResponse& trials);
// The trials as a table (or CSV), or as JSON.
void PrintTrials(const v1::QueryTrialsResponse& trials, OutputFormat format);
Table WorkersTable(const v1::ListWorkersResponse& workers);
Table ProbeTable(const v1::Probe& probe);
// Winner, runner-up, margin, ties, fingerprint, exclusions, as text.
void PrintBest(std::ostream& out, const v1::GetBestResponse& best);
// One line of progress for a trial that just finished.
std::string ProgressLine(const v1::SweepEvent& event);
// Protobuf JSON with the proto field names, for --format json.
void PrintJson(std::ostream& out, const google::protobuf::Message& message);

}  // namespace moetune::cli
