// `moetune export`: the sweep's winners per batch size as a JSON file a
// serving launcher loads (winners_file.h has the format).
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "coordinator/cli/commands.h"
#include "coordinator/cli/session.h"
#include "coordinator/cli/winners_file.h"

namespace moetune::cli {

int CmdExport(const CommandOptions& options) {
  // The winners file is JSON whatever the format: table, the default of
  // every command, means it too; the others would be ignored silently.
  if (options.format != OutputFormat::kJson &&
      options.format != OutputFormat::kTable) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--format: '", FormatName(options.format),
        "' is not allowed for export; allowed: json (the winners file; "
        "table, the default, means json here too). For the winners as CSV: "
        "moetune best --format csv")));
  }
  if (options.out_path.empty()) {
    return Fail(absl::InvalidArgumentError(
        "--out: required for export (a file, or - for standard output)"));
  }
  absl::StatusOr<Session> session = Open(options, Access::kRead);
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<int64_t> sweep_id = ResolveSweep(*session, options.sweep_id);
  if (!sweep_id.ok()) return Fail(sweep_id.status());
  v1::GetBestRequest request;
  request.set_sweep_id(*sweep_id);
  absl::StatusOr<v1::GetBestResponse> best = Best(*session, request);
  if (!best.ok()) return Fail(best.status());
  absl::StatusOr<std::string> json = WinnersJson(*best, options.context);
  if (!json.ok()) return Fail(json.status());
  if (options.out_path == "-") {
    std::cout << *json;
    return 0;
  }
  std::ofstream file(options.out_path);
  file << *json;
  file.close();
  if (!file) {
    return Fail(absl::UnavailableError(
        absl::StrCat("--out: cannot write '", options.out_path, "'")));
  }
  std::cerr << "moetune: wrote the winners of sweep " << *sweep_id << " for "
            << best->workloads_size() << " workloads to " << options.out_path
            << "\n";
  return 0;
}

}  // namespace moetune::cli
