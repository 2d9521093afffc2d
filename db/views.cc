#include "db/views.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/legacy_spelling.h"
#include "common/status_macros.h"
#include "db/trial_dimensions.h"
#include "proto/moetune.pb.h"

namespace moetune::db {
namespace {

// One row per trial with its dimensions. Columns of rows written before a
// column existed are NULL and read as the default: '' quantization is the
// default map, no tile stages the kernel's own depth.
constexpr char kTrialDimensions[] = R"sql(CREATE VIEW trial_dimensions AS
SELECT t.id AS trial_id, t.sweep_id, s.name AS sweep_name,
       %STATE% AS state,
       t.moe_backend AS backend, t.model_preset,
       %REGION% AS region,
       t.batch_size AS batch, t.context_length AS context, t.chain_layers,
       CASE WHEN t.tile_n > 0 THEN t.tile_n || 'x' || t.tile_k ||
         CASE WHEN COALESCE(t.tile_stages, 0) > 0 THEN 's' || t.tile_stages
           ELSE '' END
         ELSE '-' END AS tile,
       t.tile_n, t.tile_k, t.tp, t.ep, t.cuda_graph AS graph,
       t.rung, t.confirm_round, t.attempt, t.workload_hash, t.worker_id,
       t.reason, t.updated_at,
       CASE WHEN COALESCE(t.quantization, '') = '' THEN 'default'
         ELSE t.quantization END AS quantization,
       COALESCE(t.kv_cache_dtype, '%KV_DEFAULT%') AS kv_cache_dtype,
       COALESCE(t.attention, '%ATTENTION_DEFAULT%') AS attention,
       COALESCE(t.tile_stages, 0) AS tile_stages
FROM trials AS t JOIN sweeps AS s ON s.id = t.sweep_id)sql";

// Trials with the result of their deciding attempt (late reports of older
// attempts stay in `results` only). Times in microseconds.
constexpr char kTrialResults[] = R"sql(CREATE VIEW trial_results AS
SELECT d.*, r.outcome, r.median_us, r.mean_us, r.p90_us, r.p99_us,
       r.stddev_us, r.ci_low_us, r.ci_high_us, r.floor_us, r.efficiency,
       r.max_rel_error, r.fingerprint_hash, r.recorded_at
FROM trial_dimensions AS d
JOIN results AS r ON r.trial_id = d.trial_id AND r.attempt = d.attempt)sql";

// "CASE column WHEN 1 THEN 'QUEUED' ... ELSE 'otherwise' END": the names of
// the enum's values but the unset 0, which (like a number this build does
// not know) reads as `otherwise`.
std::string EnumNames(const char* column,
                      const google::protobuf::EnumDescriptor& type,
                      const std::string& otherwise) {
  std::string sql = absl::StrCat("CASE ", column);
  for (int i = 0; i < type.value_count(); ++i) {
    const google::protobuf::EnumValueDescriptor& value = *type.value(i);
    if (value.number() == 0) continue;
    absl::StrAppend(&sql, " WHEN ", value.number(), " THEN '", value.name(),
                    "'");
  }
  absl::StrAppend(&sql, " ELSE '", otherwise, "' END");
  return sql;
}

// Whether the database holds `view` as defined.
absl::StatusOr<bool> IsCurrent(Connection& conn, const ViewDefinition& view) {
  ASSIGN_OR_RETURN(Statement stmt,
                   conn.Prepare("SELECT sql FROM sqlite_master WHERE type = "
                                "'view' AND name = ?"));
  RETURN_IF_ERROR(stmt.BindAll(view.name));
  ASSIGN_OR_RETURN(const bool found, stmt.Step());
  return found && stmt.Text(0) == view.sql;
}

}  // namespace

std::vector<ViewDefinition> ViewDefinitions() {
  const std::string dimensions = absl::StrReplaceAll(
      kTrialDimensions,
      {{"%STATE%",
        EnumNames("t.state", *v1::TrialState_descriptor(), "UNSPECIFIED")},
       {"%REGION%", EnumNames("t.region", *v1::Region_descriptor(),
                              v1::Region_Name(v1::DECODE_STEP))},
       {"%KV_DEFAULT%", KvDtypeText(v1::KV_CACHE_DTYPE_UNSPECIFIED)},
       {"%ATTENTION_DEFAULT%",
        AttentionSplitText(v1::ATTENTION_SPLIT_UNSPECIFIED)}});
  return {{"trial_dimensions", dimensions}, {"trial_results", kTrialResults}};
}

absl::Status RecreateViews(Connection& conn) {
  const std::vector<ViewDefinition> views = ViewDefinitions();
  bool current = true;
  for (const ViewDefinition& view : views) {
    ASSIGN_OR_RETURN(const bool same, IsCurrent(conn, view));
    current = current && same;
  }
  if (current) return absl::OkStatus();
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn));
  for (auto it = views.rbegin(); it != views.rend(); ++it) {
    RETURN_IF_ERROR(conn.Exec(absl::StrCat("DROP VIEW IF EXISTS ", it->name)));
  }
  for (const ViewDefinition& view : views) RETURN_IF_ERROR(conn.Exec(view.sql));
  return txn.Commit();
}

}  // namespace moetune::db
