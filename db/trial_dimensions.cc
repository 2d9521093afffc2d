#include "db/trial_dimensions.h"

#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace moetune::db {

absl::Status WriteTrialDimensions(Connection& conn, int64_t trial_id,
                                  const v1::Workload& workload,
                                  const v1::TrialConfig& config) {
  return conn.Execute(
      "UPDATE trials SET model_preset = ?, region = ?, batch_size = ?, "
      "context_length = ?, chain_layers = ?, tile_n = ?, tile_k = ?, tp = ?, "
      "ep = ?, cuda_graph = ? WHERE id = ?",
      workload.model_preset(), static_cast<int64_t>(workload.region()),
      static_cast<int64_t>(workload.batch_size()),
      static_cast<int64_t>(workload.context_length()),
      static_cast<int64_t>(workload.chain_layers()),
      static_cast<int64_t>(config.tile().block_n()),
      static_cast<int64_t>(config.tile().block_k()),
      static_cast<int64_t>(config.tp()), static_cast<int64_t>(config.ep()),
      static_cast<int64_t>(config.cuda_graph() ? 1 : 0), trial_id);
}

absl::Status FillTrialDimensions(Connection& conn) {
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn));
  ASSIGN_OR_RETURN(Statement select,
                   conn.Prepare("SELECT id, workload, config FROM trials "
                                "WHERE batch_size IS NULL"));
  // Read all first: updating rows under an open SELECT on the same table
  // could make it visit them again.
  std::vector<std::tuple<int64_t, v1::Workload, v1::TrialConfig>> rows;
  while (true) {
    ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    auto& [id, workload, config] = rows.emplace_back();
    id = select.Int64(0);
    if (!workload.ParseFromString(select.Blob(1)) ||
        !config.ParseFromString(select.Blob(2))) {
      return absl::DataLossError(absl::StrCat(
          "trials.id ", id, ": stored workload or config does not parse"));
    }
  }
  for (const auto& [id, workload, config] : rows) {
    RETURN_IF_ERROR(WriteTrialDimensions(conn, id, workload, config));
  }
  return txn.Commit();
}

}  // namespace moetune::db
