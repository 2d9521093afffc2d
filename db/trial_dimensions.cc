#include "db/trial_dimensions.h"

#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/legacy_spelling.h"
#include "common/status_macros.h"
#include "db/trial_rows.h"
#include "kernels/reference/step_spec.h"

namespace moetune::db {
namespace {

// The API's value of a reference precision.
v1::Precision ApiPrecision(ref::Precision precision) {
  return precision == ref::Precision::kNvfp4 ? v1::NVFP4 : v1::BF16;
}

}  // namespace

std::string QuantizationText(const v1::QuantizationMap& q) {
  std::vector<std::string> groups;
  auto add = [&groups](const char* name, v1::Precision p, ref::Precision def) {
    if (p == v1::PRECISION_UNSPECIFIED || p == ApiPrecision(def)) return;
    groups.push_back(absl::StrCat(name, "=", v1::Precision_Name(p)));
  };
  const ref::Quantization defaults;
  add("attention", q.attention(), defaults.attention);
  add("dense_mlp", q.dense_mlp(), defaults.dense_mlp);
  add("lm_head", q.lm_head(), defaults.lm_head);
  add("routed_experts", q.routed_experts(), ref::kExpertPrecision);
  add("shared_expert", q.shared_expert(), ref::kExpertPrecision);
  return absl::StrJoin(groups, " ");
}

std::string KvDtypeText(v1::KvCacheDtype dtype) {
  return dtype == v1::KV_CACHE_DTYPE_UNSPECIFIED ? "KV_BF16"
                                                 : v1::KvCacheDtype_Name(dtype);
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
      KvDtypeText(workload.kv_cache_dtype()),
      AttentionSplitText(config.attention_split()),
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
    RETURN_IF_ERROR(
        ReadLegacyFields(absl::StrCat("config of trial ", id), &config));
  }
  for (const auto& [id, workload, config] : rows) {
    RETURN_IF_ERROR(WriteTrialDimensions(conn, id, workload, config));
  }
  return txn.Commit();
}

}  // namespace moetune::db
