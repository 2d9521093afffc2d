#include "coordinator/cli/best_view.h"

#include "absl/strings/str_cat.h"
#include "coordinator/cli/views.h"
#include "db/trial_dimensions.h"
#include "tuner/config_key.h"

namespace moetune::cli {
namespace {

// ", attention=NVFP4 lm_head=NVFP4, KV_FP8_E4M3" for a step in formats
// other than the default; "" for the default.
std::string FormatsText(const v1::Workload& w) {
  std::string text = db::QuantizationText(w.quantization());
  if (!text.empty()) text = absl::StrCat(", ", text);
  if (w.kv_cache_dtype() == v1::KV_FP8_E4M3) {
    absl::StrAppend(&text, ", ", db::KvDtypeText(w.kv_cache_dtype()));
  }
  return text;
}

std::string WorkloadText(const v1::BestForWorkload& w) {
  return absl::StrCat(w.workload().model_preset(), ", batch ",
                      w.workload().batch_size(), ", context ",
                      w.workload().context_length(), FormatsText(w.workload()),
                      w.workload().chain_layers() > 1
                          ? absl::StrCat(", ", w.workload().chain_layers(),
                                         " layers chained: figures per layer")
                          : "");
}

// " at 4500 GB/s" when the result says which bandwidth its floor used.
std::string AtBandwidth(const v1::Roofline& roofline) {
  if (roofline.read_gbps() <= 0) return "";
  return absl::StrCat(" at ", FormatDouble(roofline.read_gbps(), 0), " GB/s");
}

// A gang's measured communication and the model's figure for the same
// collectives, with the model's error; "" when the communication was
// modelled or there was none.
std::string CommText(const v1::Roofline& roofline) {
  if (roofline.comm_modelled() || roofline.comm_measured_us() <= 0) return "";
  std::string text =
      absl::StrCat(", communication measured ",
                   FormatDouble(roofline.comm_measured_us()), " us a step");
  if (roofline.comm_model_us() <= 0) return text + " (no model figure)";
  const double error =
      (roofline.comm_model_us() - roofline.comm_measured_us()) /
      roofline.comm_measured_us();
  return absl::StrCat(text, " (model ", FormatDouble(roofline.comm_model_us()),
                      " us: ", error >= 0 ? "+" : "",
                      FormatDouble(100 * error, 0), "%)");
}

void PrintOne(std::ostream& out, const v1::BestForWorkload& w) {
  const v1::TimingStats& s = w.best().result().stats();
  out << "workload " << w.workload_hash() << " (" << WorkloadText(w) << ") on "
      << w.fingerprint().device_name() << " [" << w.fingerprint().hash()
      << "]\n";
  out << "  best:      trial " << w.best().trial_id() << " (sweep "
      << w.best().sweep_id() << ")  " << ConfigCells(w.best().config())
      << "  median " << FormatDouble(s.median_us()) << " us (95% CI "
      << FormatDouble(s.ci_low_us()) << "-" << FormatDouble(s.ci_high_us())
      << "), floor " << FormatDouble(w.best().result().roofline().floor_us())
      << " us" << AtBandwidth(w.best().result().roofline()) << ", efficiency "
      << FormatDouble(100 * w.best().result().roofline().efficiency()) << "%"
      << CommText(w.best().result().roofline())
      << (w.decided_by().empty() ? "" : "  [" + w.decided_by() + "]") << "\n";
  if (w.has_runner_up()) {
    out << "  runner-up: trial " << w.runner_up().trial_id() << "  "
        << ConfigCells(w.runner_up().config()) << "  median "
        << FormatDouble(w.runner_up().result().stats().median_us())
        << " us, margin " << FormatDouble(w.margin_us()) << " us"
        << (w.tie() ? "  (TIE: intervals overlap)" : "") << "\n";
  }
  if (w.tied_trial_ids_size() > 1) {
    out << "  tied trials:";
    for (int64_t id : w.tied_trial_ids()) out << " " << id;
    out << "\n";
  }
}

std::vector<std::string> Row(const v1::BestForWorkload& w,
                             const std::string& role, const v1::Trial& t) {
  const v1::TimingStats& s = t.result().stats();
  const bool best = role == "best";
  return {w.workload_hash(),
          w.workload().model_preset(),
          absl::StrCat(w.workload().batch_size()),
          absl::StrCat(w.workload().context_length()),
          absl::StrCat(w.workload().chain_layers()),
          w.fingerprint().hash(),
          w.fingerprint().device_name(),
          w.fingerprint().build_hash(),
          role,
          absl::StrCat(t.trial_id()),
          absl::StrCat(t.sweep_id()),
          t.config().moe_backend(),
          tuner::TileText(t.config()),
          absl::StrCat(t.config().tp()),
          absl::StrCat(t.config().ep()),
          t.config().cuda_graph() ? "true" : "false",
          tuner::AttentionName(t.config()),
          RawNumber(s.median_us()),
          RawNumber(s.ci_low_us()),
          RawNumber(s.ci_high_us()),
          RawNumber(t.result().roofline().floor_us()),
          RawNumber(t.result().roofline().efficiency()),
          best ? "" : RawNumber(w.margin_us()),
          best ? "" : (w.tie() ? "true" : "false"),
          best ? w.decided_by() : ""};
}

}  // namespace

void PrintBest(std::ostream& out, const v1::GetBestResponse& best) {
  // A backend is excluded from the whole sweep (no worker had it), so it is
  // said once, above the workloads it holds for.
  if (!best.excluded().empty()) {
    out << "excluded, for every workload"
        << (best.workloads().empty() ? "" : " below") << ":\n";
  }
  for (const v1::ExcludedBackend& e : best.excluded()) {
    out << "  " << e.backend() << ": " << e.reason() << "\n";
  }
  for (const v1::BestForWorkload& w : best.workloads()) PrintOne(out, w);
  if (best.workloads().empty()) out << "no correct, timed trial to rank\n";
}

Table BestTable(const v1::GetBestResponse& best) {
  Table table;
  table.headers = {
      "workload_hash", "preset",     "batch",     "ctx",       "chain_layers",
      "fingerprint",   "device",     "build",     "role",      "trial",
      "sweep",         "backend",    "tile",      "tp",        "ep",
      "graph",         "attention",  "median_us", "ci_low_us", "ci_high_us",
      "floor_us",      "efficiency", "margin_us", "tie",       "decided_by"};
  for (const v1::BestForWorkload& w : best.workloads()) {
    table.rows.push_back(Row(w, "best", w.best()));
    if (w.has_runner_up()) {
      table.rows.push_back(Row(w, "runner_up", w.runner_up()));
    }
  }
  return table;
}

}  // namespace moetune::cli
