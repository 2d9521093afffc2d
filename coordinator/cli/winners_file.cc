#include "coordinator/cli/winners_file.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "common/json_text.h"
#include "google/protobuf/struct.pb.h"
#include "tuner/config_key.h"

namespace moetune::cli {
namespace {

using google::protobuf::Struct;

// What must be equal for two winners to share one file.
std::string Identity(const v1::BestForWorkload& w) {
  return absl::StrCat("preset ", w.workload().model_preset(), ", region ",
                      v1::Region_Name(w.workload().region()), ", context ",
                      w.workload().context_length(), ", device ",
                      w.fingerprint().device_name());
}

Struct Entry(const v1::BestForWorkload& w) {
  const v1::Trial& t = w.best();
  Struct entry;
  auto& f = *entry.mutable_fields();
  f["moe_backend"].set_string_value(t.config().moe_backend());
  f["block_n"].set_number_value(t.config().tile().block_n());
  f["block_k"].set_number_value(t.config().tile().block_k());
  f["stages"].set_number_value(t.config().tile().stages());
  f["tp"].set_number_value(t.config().tp());
  f["ep"].set_number_value(t.config().ep());
  f["cuda_graph"].set_bool_value(t.config().cuda_graph());
  f["attention"].set_string_value(tuner::AttentionName(t.config()));
  f["median_us"].set_number_value(t.result().stats().median_us());
  f["ci_low_us"].set_number_value(t.result().stats().ci_low_us());
  f["ci_high_us"].set_number_value(t.result().stats().ci_high_us());
  f["tie"].set_bool_value(w.tie());
  f["decided_by"].set_string_value(w.decided_by());
  f["trial_id"].set_number_value(t.trial_id());
  f["sweep_id"].set_number_value(t.sweep_id());
  f["model_preset"].set_string_value(w.workload().model_preset());
  f["context_length"].set_number_value(w.workload().context_length());
  f["device"].set_string_value(w.fingerprint().device_name());
  f["fingerprint"].set_string_value(w.fingerprint().hash());
  f["build_hash"].set_string_value(w.fingerprint().build_hash());
  return entry;
}

}  // namespace

absl::StatusOr<std::string> WinnersJson(const v1::GetBestResponse& best,
                                        int context) {
  Struct root;
  std::map<int, const v1::BestForWorkload*> by_batch;
  for (const v1::BestForWorkload& w : best.workloads()) {
    if (context > 0 && w.workload().context_length() != context) continue;
    auto [it, added] = by_batch.emplace(w.workload().batch_size(), &w);
    if (!added) {
      return absl::InvalidArgumentError(absl::StrCat(
          "two winners for batch ", w.workload().batch_size(), " (",
          Identity(*it->second), "; ", Identity(w),
          "): choose one context with --context, or export the sweep of one "
          "device"));
    }
    (*root.mutable_fields())[absl::StrCat(w.workload().batch_size())]
        .mutable_struct_value()
        ->CopyFrom(Entry(w));
  }
  if (by_batch.empty()) {
    return absl::NotFoundError(
        context > 0 ? absl::StrCat("no winner with context ", context)
                    : "no winner to export (no trial succeeded)");
  }
  // Batch sizes in numeric order, fields sorted: the same winners give the
  // same file, byte for byte.
  google::protobuf::Value document;
  *document.mutable_struct_value() = std::move(root);
  return JsonText(document) + "\n";
}

}  // namespace moetune::cli
