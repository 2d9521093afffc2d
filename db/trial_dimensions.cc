#include "db/trial_dimensions.h"

#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace moetune::db {

std::string QuantizationText(const v1::QuantizationMap& q) {
  std::vector<std::string> groups;
  auto add = [&groups](const char* name, v1::Precision p, v1::Precision def) {
    if (p == v1::PRECISION_UNSPECIFIED || p == def) return;
    groups.push_back(absl::StrCat(name, "=", v1::Precision_Name(p)));
  };
  add("attention", q.attention(), v1::BF16);
  add("dense_mlp", q.dense_mlp(), v1::NVFP4);
  add("lm_head", q.lm_head(), v1::BF16);
  add("routed_experts", q.routed_experts(), v1::NVFP4);
  add("shared_expert", q.shared_expert(), v1::NVFP4);
  return absl::StrJoin(groups, " ");
}

std::string KvDtypeText(v1::KvCacheDtype dtype) {
  return dtype == v1::KV_CACHE_DTYPE_UNSPECIFIED ? "KV_BF16"
                                                 : v1::KvCacheDtype_Name(dtype);
}

std::string AttentionText(const v1::TrialConfig& config) {
  return config.attention().empty() ? "tp" : config.attention();
}

absl::Status WriteTrialDimensions(Connection& conn, int64_t trial_id,
                                  const v1::Workload& workload,
                                  const v1::TrialConfig& config) {
  return conn.Execute(
      "UPDATE trials SET model_preset = ?, region = ?, batch_size = ?, "
      "context_length = ?, chain_layers = ?, tile_n = ?, tile_k = ?, tp = ?, "
      "ep = ?, cuda_graph = ?, quantization = ?, kv_cache_dtype = ?, "
      "attention = ?, tile_stages = ? WHERE id = ?",
      workload.model_preset(), static_cast<int64_t>(workload.region()),
      static_cast<int64_t>(workload.batch_size()),
      static_cast<int64_t>(workload.context_length()),
      static_cast<int64_t>(workload.chain_layers()),
      static_cast<int64_t>(config.tile().block_n()),
      static_cast<int64_t>(config.tile().block_k()),
      static_cast<int64_t>(config.tp()), static_cast<int64_t>(config.ep()),
      static_cast<int64_t>(config.cuda_graph() ? 1 : 0),
      QuantizationText(workload.quantization()),
      KvDtypeText(workload.kv_cache_dtype()), AttentionText(config),
      static_cast<int64_t>(config.tile().stages()), trial_id);
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
