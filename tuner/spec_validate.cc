// ValidateSweepSpec (declared in spec.h): one small check per field, run in
// field order so that the first error reported is the first in the spec.
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/legacy_spelling.h"
#include "common/status_macros.h"
#include "common/text_bounds.h"
#include "kernels/backends/limits.h"
#include "kernels/backends/registry.h"
#include "kernels/backends/tile_shape.h"
#include "kernels/model/model_config.h"
#include "tuner/spec.h"

namespace moetune::tuner {
namespace {

using backends::BackendDescriptor;
using model::ModelConfig;

constexpr int kDegrees[] = {1, 2, 4, 8};
constexpr char kDegreeList[] = "1, 2, 4, 8";

absl::Status Invalid(const std::string& path, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

std::string At(const std::string& path, int index) {
  return absl::StrCat(path, "[", index, "]");
}

// `show` maps an element to its text in messages; two elements repeat when
// their texts are equal (every element type here prints all of its fields).
template <typename List, typename Show>
absl::Status CheckNoRepeat(const List& list, const std::string& path,
                           Show show) {
  for (int i = 0; i < list.size(); ++i) {
    const std::string text = show(list.Get(i));
    for (int j = 0; j < i; ++j) {
      if (show(list.Get(j)) != text) continue;
      return Invalid(At(path, i), absl::StrCat(text, " is repeated (first at [",
                                               j, "]); list each value once"));
    }
  }
  return absl::OkStatus();
}

std::string ShowInt(int32_t value) { return absl::StrCat(value); }

// Non-empty, each in [lo, hi], no repeats.
absl::Status CheckIntList(const google::protobuf::RepeatedField<int32_t>& list,
                          const std::string& path, int lo, int hi) {
  if (list.empty()) return Invalid(path, "must not be empty");
  for (int i = 0; i < list.size(); ++i) {
    if (list.Get(i) < lo || list.Get(i) > hi) {
      return Invalid(At(path, i),
                     absl::StrCat(list.Get(i),
                                  " is out of range; allowed: ", lo, "..", hi));
    }
  }
  return CheckNoRepeat(list, path, ShowInt);
}

// ------------------------------------------------------------- workload --

absl::Status CheckPreset(const v1::WorkloadSpace& w, const ModelConfig** out) {
  *out = model::FindPreset(w.model_preset());
  if (*out != nullptr) return absl::OkStatus();
  return Invalid(
      "workload.model_preset",
      absl::StrCat("unknown preset '", w.model_preset(),
                   "'; allowed: ", absl::StrJoin(model::PresetNames(), ", ")));
}

absl::Status CheckLayers(const v1::WorkloadSpace& w,
                         const ModelConfig& preset) {
  if (w.layers() >= 0 && w.layers() <= preset.num_layers) {
    return absl::OkStatus();
  }
  return Invalid("workload.layers",
                 absl::StrCat(w.layers(), " is out of range; allowed: 0..",
                              preset.num_layers, " (0 = all layers of '",
                              preset.name, "')"));
}

absl::Status CheckHistogram(const v1::Routing& routing,
                            const ModelConfig& preset) {
  const std::string path = "workload.routing.histogram";
  const auto& histogram = routing.histogram();
  if (histogram.empty()) {
    return Invalid(path, "must not be empty for REPLAYED routing");
  }
  if (histogram.size() != preset.num_experts) {
    return Invalid(
        path, absl::StrCat("has ", histogram.size(),
                           " entries; allowed: exactly ", preset.num_experts,
                           " (one per routed "
                           "expert of '",
                           preset.name, "')"));
  }
  bool any_positive = false;
  for (int i = 0; i < histogram.size(); ++i) {
    if (!std::isfinite(histogram.Get(i)) || histogram.Get(i) < 0) {
      return Invalid(At(path, i), absl::StrCat(histogram.Get(i),
                                               " is out of range; allowed: "
                                               "finite values >= 0"));
    }
    any_positive = any_positive || histogram.Get(i) > 0;
  }
  if (any_positive) return absl::OkStatus();
  return Invalid(path, "all entries are 0; allowed: at least one > 0");
}

absl::Status CheckRouting(const v1::Routing& routing,
                          const ModelConfig& preset) {
  const v1::Routing::Distribution kind = routing.distribution();
  if (!v1::Routing::Distribution_IsValid(kind)) {
    return Invalid("workload.routing.distribution",
                   absl::StrCat(kind,
                                " is not allowed; allowed: UNIFORM, "
                                "SKEWED, REPLAYED"));
  }
  const bool skewed = kind == v1::Routing::SKEWED;
  if (skewed && !(std::isfinite(routing.skew()) && routing.skew() > 0)) {
    return Invalid("workload.routing.skew",
                   absl::StrCat(routing.skew(),
                                " is out of range; allowed: "
                                "finite values > 0 for SKEWED"));
  }
  if (!skewed && routing.skew() != 0) {
    return Invalid("workload.routing.skew",
                   "is only used by SKEWED routing; set distribution: SKEWED "
                   "or drop skew");
  }
  if (kind == v1::Routing::REPLAYED) return CheckHistogram(routing, preset);
  if (!routing.histogram().empty()) {
    return Invalid("workload.routing.histogram",
                   "is only used by REPLAYED routing; set distribution: "
                   "REPLAYED or drop histogram");
  }
  return absl::OkStatus();
}

absl::Status CheckRegion(const v1::WorkloadSpace& w,
                         const v1::SearchSpace& space,
                         const BackendCatalog& catalog) {
  if (!v1::Region_IsValid(w.region())) {
    return Invalid("workload.region", absl::StrCat(w.region(),
                                                   " is not allowed; allowed: "
                                                   "DECODE_STEP, MOE_LAYER"));
  }
  if (w.region() == v1::MOE_LAYER) return absl::OkStatus();
  for (const std::string& name : space.moe_backends()) {
    const BackendDescriptor* backend = catalog.Find(name);
    if (backend == nullptr || backend->times_decode_step) continue;
    return Invalid("workload.region",
                   absl::StrCat("DECODE_STEP is not timed by '", name,
                                "' (it times MOE_LAYER only); allowed with it: "
                                "MOE_LAYER"));
  }
  return absl::OkStatus();
}

absl::Status CheckChain(const v1::WorkloadSpace& w,
                        const v1::SearchSpace& space,
                        const BackendCatalog& catalog) {
  const std::string path = "workload.chain_layers";
  // Each chained layer keeps its weights on the GPU.
  const int max = backends::kMaxChainLayers;
  if (w.chain_layers() < 0 || w.chain_layers() > max) {
    return Invalid(
        path, absl::StrCat(w.chain_layers(), " is out of range; allowed: 0..",
                           max, " (0 or 1 = one layer)"));
  }
  if (w.chain_layers() <= 1) return absl::OkStatus();
  if (w.region() != v1::MOE_LAYER) {
    return Invalid(path,
                   "chains MoE layers; allowed with region: MOE_LAYER only");
  }
  for (const std::string& name : space.moe_backends()) {
    const BackendDescriptor* backend = catalog.Find(name);
    if (backend == nullptr) continue;
    if (catalog.IsPlugin(name)) {
      return Invalid(path, absl::StrCat("'", name,
                                        "' is a plugin backend, which times "
                                        "one layer; chains are timed by "
                                        "native GPU backends only"));
    }
    if (backend->is_gpu()) continue;
    return Invalid(path, absl::StrCat("'", name,
                                      "' times one layer; chains are timed "
                                      "by GPU backends only"));
  }
  return absl::OkStatus();
}

// One group's precision: a known value among `allowed` (UNSPECIFIED is the
// group's default and always allowed).
absl::Status CheckPrecision(v1::Precision precision, const std::string& field,
                            bool bf16_allowed, const char* why_not_bf16) {
  const std::string path = absl::StrCat("workload.quantization.", field);
  const std::string allowed = bf16_allowed ? "NVFP4, BF16" : "NVFP4";
  if (!v1::Precision_IsValid(precision)) {
    return Invalid(
        path, absl::StrCat(precision, " is not allowed; allowed: ", allowed));
  }
  if (precision != v1::BF16 || bf16_allowed) return absl::OkStatus();
  return Invalid(path, absl::StrCat("BF16 is not allowed; allowed: ", allowed,
                                    " (", why_not_bf16, ")"));
}

// Whether a map sets attention, the dense MLP or lm_head to other than its
// default (unset fields and explicit defaults are the default).
bool NonDefaultQuantization(const v1::QuantizationMap& map) {
  const v1::QuantizationMap q = CanonicalQuantization(map);
  return q.attention() != v1::PRECISION_UNSPECIFIED ||
         q.dense_mlp() != v1::PRECISION_UNSPECIFIED ||
         q.lm_head() != v1::PRECISION_UNSPECIFIED;
}

absl::Status CheckQuantization(const v1::WorkloadSpace& w) {
  const v1::QuantizationMap& q = w.quantization();
  constexpr char kMoe[] = "the MoE backends are NVFP4 kernels";
  RETURN_IF_ERROR(CheckPrecision(q.attention(), "attention", true, ""));
  RETURN_IF_ERROR(CheckPrecision(q.dense_mlp(), "dense_mlp", true, ""));
  RETURN_IF_ERROR(CheckPrecision(q.lm_head(), "lm_head", true, ""));
  RETURN_IF_ERROR(
      CheckPrecision(q.routed_experts(), "routed_experts", false, kMoe));
  RETURN_IF_ERROR(
      CheckPrecision(q.shared_expert(), "shared_expert", false, kMoe));
  if (w.region() != v1::MOE_LAYER || !NonDefaultQuantization(q)) {
    return absl::OkStatus();
  }
  return Invalid("workload.quantization",
                 "attention, dense_mlp and lm_head are not in an MoE layer: "
                 "with region MOE_LAYER allowed: the default (unset); "
                 "set region: DECODE_STEP to time them");
}

std::string ShowKvDtype(int dtype) {
  // Unset is KV_BF16: listing both would repeat one workload.
  return dtype == v1::KV_CACHE_DTYPE_UNSPECIFIED
             ? "KV_BF16"
             : v1::KvCacheDtype_Name(static_cast<v1::KvCacheDtype>(dtype));
}

absl::Status CheckKvDtypes(const v1::WorkloadSpace& w) {
  const std::string path = "workload.kv_cache_dtypes";
  const auto& list = w.kv_cache_dtypes();
  for (int i = 0; i < list.size(); ++i) {
    const int dtype = list.Get(i);
    if (!v1::KvCacheDtype_IsValid(dtype)) {
      return Invalid(At(path, i),
                     absl::StrCat(dtype,
                                  " is not allowed; allowed: KV_BF16, "
                                  "KV_FP8_E4M3"));
    }
    if (dtype == v1::KV_FP8_E4M3 && w.region() == v1::MOE_LAYER) {
      return Invalid(At(path, i),
                     "KV_FP8_E4M3 is not read by an MoE layer: with region "
                     "MOE_LAYER allowed: KV_BF16 (or an empty list); set "
                     "region: DECODE_STEP to time it");
    }
  }
  return CheckNoRepeat(list, path, ShowKvDtype);
}

absl::Status CheckWorkload(const v1::SweepSpec& spec,
                           const BackendCatalog& catalog) {
  const v1::WorkloadSpace& w = spec.workload();
  const ModelConfig* preset = nullptr;
  RETURN_IF_ERROR(CheckPreset(w, &preset));
  RETURN_IF_ERROR(CheckLayers(w, *preset));
  RETURN_IF_ERROR(
      CheckIntList(w.batch_sizes(), "workload.batch_sizes", 1, kMaxBatchSize));
  RETURN_IF_ERROR(CheckIntList(w.context_lengths(), "workload.context_lengths",
                               1, kMaxContextLength));
  RETURN_IF_ERROR(CheckRouting(w.routing(), *preset));
  RETURN_IF_ERROR(CheckRegion(w, spec.space(), catalog));
  RETURN_IF_ERROR(CheckChain(w, spec.space(), catalog));
  RETURN_IF_ERROR(CheckQuantization(w));
  return CheckKvDtypes(w);
}

// ---------------------------------------------------------------- space --

std::string ShowTile(const v1::TileShape& tile) {
  return backends::TileText(backends::TileOf(tile));
}

bool HasTile(const BackendDescriptor& backend, const v1::TileShape& tile) {
  return backend.HasTile(backends::TileOf(tile));
}

absl::Status CheckBackends(const v1::SearchSpace& space,
                           const BackendCatalog& catalog) {
  const std::string path = "space.moe_backends";
  if (space.moe_backends().empty()) {
    return Invalid(path, absl::StrCat("must not be empty; allowed: ",
                                      catalog.AllowedText()));
  }
  for (int i = 0; i < space.moe_backends().size(); ++i) {
    const std::string& name = space.moe_backends(i);
    if (catalog.Find(name) != nullptr) continue;
    return Invalid(At(path, i),
                   absl::StrCat("unknown backend '", name,
                                "'; allowed: ", catalog.AllowedText()));
  }
  return CheckNoRepeat(space.moe_backends(), path, [](const std::string& s) {
    return absl::StrCat("'", s, "'");
  });
}

// "tiles of cpu_blocked: 4x64, 8x128; tiles of fused_gemv: ..." over the
// listed backends that take tiles, or a note that none does.
std::string ListedTiles(const v1::SearchSpace& space,
                        const BackendCatalog& catalog) {
  std::vector<std::string> parts;
  for (const std::string& name : space.moe_backends()) {
    const BackendDescriptor* backend = catalog.Find(name);
    if (backend == nullptr || backend->tiles.empty()) continue;
    parts.push_back(absl::StrCat("tiles of ", name, ": ", backend->TileList()));
  }
  if (parts.empty()) return "no listed backend takes a tile";
  return absl::StrJoin(parts, "; ");
}

absl::Status CheckTiles(const v1::SearchSpace& space,
                        const BackendCatalog& catalog) {
  for (int i = 0; i < space.tiles().size(); ++i) {
    const v1::TileShape& tile = space.tiles(i);
    bool known = false;
    for (const std::string& name : space.moe_backends()) {
      const BackendDescriptor* backend = catalog.Find(name);
      known = known || (backend != nullptr && HasTile(*backend, tile));
    }
    if (known) continue;
    return Invalid(
        At("space.tiles", i),
        absl::StrCat(
            "{block_n: ", tile.block_n(), ", block_k: ", tile.block_k(),
            tile.stages() != 0 ? absl::StrCat(", stages: ", tile.stages()) : "",
            "} is not a tile of any listed backend; ",
            ListedTiles(space, catalog)));
  }
  return CheckNoRepeat(space.tiles(), "space.tiles", ShowTile);
}

bool IsDegree(int value) {
  for (int degree : kDegrees) {
    if (value == degree) return true;
  }
  return false;
}

absl::Status CheckDegrees(const google::protobuf::RepeatedField<int32_t>& list,
                          const std::string& path) {
  for (int i = 0; i < list.size(); ++i) {
    if (IsDegree(list.Get(i))) continue;
    return Invalid(
        At(path, i),
        absl::StrCat(list.Get(i), " is not allowed; allowed: ", kDegreeList));
  }
  return CheckNoRepeat(list, path, ShowInt);
}

// The list as WithDefaults will see it: empty means {1}.
std::vector<int> OrOne(const google::protobuf::RepeatedField<int32_t>& list) {
  if (list.empty()) return {1};
  return {list.begin(), list.end()};
}

absl::Status CheckWorldSize(const v1::SearchSpace& space) {
  const int world = space.world_size();
  if (world == 0) return absl::OkStatus();
  if (!IsDegree(world)) {
    return Invalid("space.world_size",
                   absl::StrCat(world,
                                " is not allowed; allowed: 0 (no "
                                "filter), ",
                                kDegreeList));
  }
  const std::vector<int> tps = OrOne(space.tp());
  const std::vector<int> eps = OrOne(space.ep());
  for (int tp : tps) {
    for (int ep : eps) {
      if (tp * ep == world) return absl::OkStatus();
    }
  }
  return Invalid("space.world_size",
                 absl::StrCat("no (tp, ep) pair has tp * ep == ", world,
                              "; tp: {", absl::StrJoin(tps, ", "), "}, ep: {",
                              absl::StrJoin(eps, ", "), "} (empty = {1})"));
}

// How a dimension listed in either spelling is named in messages: its
// legacy string list where the spec wrote that (the JSON spelling of
// docs/specs.md, which NormalizeLegacyFields moved into the enum list value
// by value), else its enum list.
struct ListNaming {
  std::string path;
  bool legacy = false;
};

// A value as the spec wrote it: 'oneshot', or ALL_REDUCE_ONESHOT (its
// number when it has no name).
std::string ShowAllReduce(const ListNaming& list, int value) {
  if (list.legacy) {
    return absl::StrCat(
        "'", AllReduceImplText(static_cast<v1::AllReduceImpl>(value)), "'");
  }
  return v1::AllReduceImpl_IsValid(value) ? v1::AllReduceImpl_Name(value)
                                          : absl::StrCat(value);
}

std::string ShowAttention(const ListNaming& list, int value) {
  if (list.legacy) {
    return absl::StrCat(
        "'", AttentionSplitText(static_cast<v1::AttentionSplit>(value)), "'");
  }
  return v1::AttentionSplit_IsValid(value) ? v1::AttentionSplit_Name(value)
                                           : absl::StrCat(value);
}

absl::Status CheckAllReduce(const v1::SearchSpace& space,
                            const ListNaming& list) {
  const auto show = [&list](int value) { return ShowAllReduce(list, value); };
  for (int i = 0; i < space.all_reduce_impls().size(); ++i) {
    const int value = space.all_reduce_impls(i);
    if (value == v1::ALL_REDUCE_NCCL || value == v1::ALL_REDUCE_ONESHOT) {
      continue;
    }
    return Invalid(At(list.path, i),
                   absl::StrCat(show(value),
                                " is not allowed; allowed: ALL_REDUCE_NCCL, "
                                "ALL_REDUCE_ONESHOT"));
  }
  return CheckNoRepeat(space.all_reduce_impls(), list.path, show);
}

absl::Status CheckCommunication(const v1::SearchSpace& space) {
  const std::string path = "space.communication";
  for (int i = 0; i < space.communication().size(); ++i) {
    const int value = space.communication(i);
    if (value == v1::MODELLED || value == v1::MEASURED) continue;
    const std::string name = v1::Communication_IsValid(value)
                                 ? v1::Communication_Name(value)
                                 : absl::StrCat(value);
    return Invalid(At(path, i), absl::StrCat(name,
                                             " is not allowed; allowed: "
                                             "MODELLED, MEASURED"));
  }
  return CheckNoRepeat(space.communication(), path,
                       [](int value) { return v1::Communication_Name(value); });
}

// Data-parallel attention splits a decode step's batch and leaves its
// attention whole on every rank: an MoE layer timed alone has neither.
absl::Status CheckAttention(const v1::SearchSpace& space,
                            const ListNaming& list, v1::Region region) {
  const auto show = [&list](int value) { return ShowAttention(list, value); };
  for (int i = 0; i < space.attention_splits().size(); ++i) {
    const int value = space.attention_splits(i);
    if (value != v1::ATTENTION_TP && value != v1::ATTENTION_DP) {
      return Invalid(At(list.path, i),
                     absl::StrCat(show(value),
                                  " is not allowed; allowed: ATTENTION_TP, "
                                  "ATTENTION_DP"));
    }
    if (value == v1::ATTENTION_DP && region == v1::MOE_LAYER) {
      return Invalid(
          At(list.path, i),
          absl::StrCat(show(value),
                       " splits a decode step's batch over the ranks with "
                       "attention whole on each; an MoE layer has no "
                       "attention: with region MOE_LAYER allowed: ",
                       list.legacy ? AttentionSplitText(v1::ATTENTION_TP)
                                   : v1::AttentionSplit_Name(v1::ATTENTION_TP),
                       "; set region: DECODE_STEP to time it"));
    }
  }
  return CheckNoRepeat(space.attention_splits(), list.path, show);
}

// The all-reduce, communication and attention lists, the legacy strings
// moved into the enum lists first (a string they do not know is refused
// there, naming its field).
absl::Status CheckCollectives(const v1::SearchSpace& written,
                              v1::Region region) {
  v1::SearchSpace space = written;
  RETURN_IF_ERROR(NormalizeLegacyFields(space));
  RETURN_IF_ERROR(
      CheckAllReduce(space, written.allreduce().empty()
                                ? ListNaming{"space.all_reduce_impls"}
                                : ListNaming{"space.allreduce", true}));
  RETURN_IF_ERROR(CheckCommunication(space));
  return CheckAttention(space,
                        written.attention().empty()
                            ? ListNaming{"space.attention_splits"}
                            : ListNaming{"space.attention", true},
                        region);
}

absl::Status CheckSpace(const v1::SearchSpace& space, v1::Region region,
                        const BackendCatalog& catalog) {
  RETURN_IF_ERROR(CheckBackends(space, catalog));
  RETURN_IF_ERROR(CheckTiles(space, catalog));
  RETURN_IF_ERROR(CheckDegrees(space.tp(), "space.tp"));
  RETURN_IF_ERROR(CheckDegrees(space.ep(), "space.ep"));
  RETURN_IF_ERROR(CheckNoRepeat(space.cuda_graph(), "space.cuda_graph",
                                [](bool b) { return b ? "true" : "false"; }));
  RETURN_IF_ERROR(CheckWorldSize(space));
  return CheckCollectives(space, region);
}

// ------------------------------------------------- strategy, measurement --

// `value` of the strategy knob `field` must be 0 (default) or in lo..hi.
absl::Status CheckKnob(int value, const char* field, int lo, int hi,
                       const char* zero_means) {
  if (value == 0 || (value >= lo && value <= hi)) return absl::OkStatus();
  return Invalid(absl::StrCat("strategy.", field),
                 absl::StrCat(value, " is out of range; allowed: ", lo, "..",
                              hi, " (0 = ", zero_means, ")"));
}

absl::Status CheckKnobs(const v1::Strategy& strategy) {
  RETURN_IF_ERROR(CheckKnob(strategy.eta(), "eta", 2, 100, "3"));
  RETURN_IF_ERROR(CheckKnob(strategy.min_iterations(), "min_iterations", 1,
                            kMaxIterations, "iterations / eta^rung, >= 3"));
  RETURN_IF_ERROR(
      CheckKnob(strategy.initial_random(), "initial_random", 1, 100000, "8"));
  RETURN_IF_ERROR(CheckKnob(strategy.confirm_top_k(), "confirm_top_k", 1, 1000,
                            "no confirmation round"));
  return CheckKnob(strategy.confirm_rounds(), "confirm_rounds", 1, 100, "2");
}

absl::Status CheckStrategy(const v1::Strategy& strategy) {
  if (!v1::Strategy::Kind_IsValid(strategy.kind())) {
    return Invalid("strategy.kind",
                   absl::StrCat(strategy.kind(),
                                " is not allowed; allowed: GRID, RANDOM, "
                                "SUCCESSIVE_HALVING, TPE"));
  }
  if (strategy.max_trials() < 0) {
    return Invalid("strategy.max_trials",
                   absl::StrCat(strategy.max_trials(),
                                " is out of range; "
                                "allowed: >= 0 (0 = no limit)"));
  }
  const double seconds = strategy.max_gpu_seconds();
  if (!std::isfinite(seconds) || seconds < 0) {
    return Invalid("strategy.max_gpu_seconds",
                   absl::StrCat(seconds,
                                " is out of range; allowed: finite "
                                "values >= 0 (0 = no limit)"));
  }
  return CheckKnobs(strategy);
}

absl::Status CheckCount(int value, const std::string& path, int lo, int hi,
                        int default_value) {
  if (value == 0 || (value >= lo && value <= hi)) return absl::OkStatus();
  return Invalid(
      path, absl::StrCat(value, " is out of range; allowed: ", lo, "..", hi,
                         " (0 = default ", default_value, ")"));
}

absl::Status CheckMeasurement(const v1::Measurement& m) {
  RETURN_IF_ERROR(CheckCount(m.warmup_iterations(),
                             "measurement.warmup_iterations", 1,
                             kMaxWarmupIterations, kDefaultWarmupIterations));
  RETURN_IF_ERROR(CheckCount(m.iterations(), "measurement.iterations", 1,
                             kMaxIterations, kDefaultIterations));
  const double timeout = m.trial_timeout_s();
  if (timeout != 0 && !(timeout >= 1 && timeout <= kMaxTrialTimeoutS)) {
    return Invalid("measurement.trial_timeout_s",
                   absl::StrCat(timeout, " is out of range; allowed: 1..",
                                kMaxTrialTimeoutS, " (0 = default ",
                                kDefaultTrialTimeoutS, ")"));
  }
  return CheckCount(m.max_attempts(), "measurement.max_attempts", 1,
                    kMaxAttempts, kDefaultMaxAttempts);
}

}  // namespace

absl::Status ValidateSweepSpec(const v1::SweepSpec& spec,
                               const BackendCatalog& catalog) {
  // Bounded, printable text first: a name of megabytes or with terminal
  // escapes is refused before anything else reads it.
  RETURN_IF_ERROR(CheckMessageText(spec, ""));
  RETURN_IF_ERROR(CheckWorkload(spec, catalog));
  RETURN_IF_ERROR(CheckSpace(spec.space(), spec.workload().region(), catalog));
  RETURN_IF_ERROR(CheckStrategy(spec.strategy()));
  return CheckMeasurement(spec.measurement());
}

absl::Status ValidateSweepSpec(const v1::SweepSpec& spec) {
  return ValidateSweepSpec(spec, BackendCatalog());
}

}  // namespace moetune::tuner
