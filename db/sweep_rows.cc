#include "db/sweep_rows.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "db/codec.h"
#include "db/trial_rows.h"

namespace moetune::db {
namespace {

constexpr std::string_view kSelectSweeps =
    "SELECT id, name, spec, state, created_at, finished_at FROM sweeps";

}  // namespace

using v1::SweepState;

absl::Status FillTrialCounts(Connection& conn, v1::Sweep* sweep) {
  ASSIGN_OR_RETURN(Statement stmt,
                   conn.Prepare("SELECT state, COUNT(*) FROM trials "
                                "WHERE sweep_id = ? GROUP BY state"));
  RETURN_IF_ERROR(stmt.BindAll(sweep->sweep_id()));
  int total = 0;
  while (true) {
    ASSIGN_OR_RETURN(const bool has_row, stmt.Step());
    if (!has_row) break;
    const int count = static_cast<int>(stmt.Int64(1));
    (*sweep->mutable_trial_counts())[StateName(
        static_cast<TrialState>(stmt.Int64(0)))] = count;
    total += count;
  }
  sweep->set_total_trials(total);
  return absl::OkStatus();
}

absl::StatusOr<v1::Sweep> SweepFromRow(Connection& conn, const Statement& row) {
  v1::Sweep sweep;
  sweep.set_sweep_id(row.Int64(0));
  sweep.set_name(row.Text(1));
  const std::string what = absl::StrCat("spec of sweep ", row.Int64(0));
  RETURN_IF_ERROR(ParseMessage(row.Blob(2), what, sweep.mutable_spec()));
  RETURN_IF_ERROR(
      ReadLegacyFields(what, sweep.mutable_spec()->mutable_space()));
  sweep.set_state(static_cast<SweepState>(row.Int64(3)));
  sweep.set_created_at_unix_ms(row.Int64(4));
  sweep.set_finished_at_unix_ms(row.IsNull(5) ? 0 : row.Int64(5));
  RETURN_IF_ERROR(FillTrialCounts(conn, &sweep));
  return sweep;
}

absl::StatusOr<std::vector<v1::Sweep>> SelectSweeps(Connection& conn,
                                                    std::string_view tail,
                                                    int64_t param) {
  ASSIGN_OR_RETURN(
      Statement stmt,
      conn.Prepare(absl::StrCat(
          absl::string_view(kSelectSweeps.data(), kSelectSweeps.size()), " ",
          absl::string_view(tail.data(), tail.size()))));
  RETURN_IF_ERROR(stmt.BindAll(param));
  std::vector<v1::Sweep> sweeps;
  while (true) {
    ASSIGN_OR_RETURN(const bool has_row, stmt.Step());
    if (!has_row) return sweeps;
    ASSIGN_OR_RETURN(v1::Sweep sweep, SweepFromRow(conn, stmt));
    sweeps.push_back(std::move(sweep));
  }
}

}  // namespace moetune::db
