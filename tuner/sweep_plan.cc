#include "tuner/sweep_plan.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/backends/registry.h"
#include "kernels/backends/tile_shape.h"
#include "kernels/model/model_config.h"
#include "kernels/reference/step_spec.h"
#include "tuner/spec.h"

namespace moetune::tuner {
namespace {

// The tiles a backend runs on `shape` (see the header); std::nullopt is the
// single entry of a backend without tiles, whose config leaves `tile` unset.
std::vector<std::optional<backends::Tile>> TilesFor(
    const backends::BackendDescriptor& backend, const v1::SearchSpace& space,
    const backends::LayerShape& shape) {
  if (backend.tiles.empty()) return {std::nullopt};
  std::vector<std::optional<backends::Tile>> tiles;
  for (const v1::TileShape& listed : space.tiles()) {
    const backends::Tile tile = backends::TileOf(listed);
    if (backend.HasTile(tile)) tiles.push_back(tile);
  }
  if (tiles.empty()) tiles.push_back(backend.TileFor(shape));
  return tiles;
}

// Graph replay is a dimension of GPU backends whose region can be captured.
std::vector<bool> GraphModesFor(const backends::BackendDescriptor& backend,
                                const v1::SearchSpace& space) {
  if (!backend.is_gpu() || !backend.graph_capturable) return {false};
  return {space.cuda_graph().begin(), space.cuda_graph().end()};
}

// How the ranks of a (tp, ep) layout communicate: the all-reduce and
// whether it is measured on a gang or modelled.
struct CommChoice {
  // As listed; unset when the space lists none.
  v1::AllReduceImpl all_reduce = v1::ALL_REDUCE_IMPL_UNSPECIFIED;
  v1::Communication communication = v1::COMMUNICATION_UNSPECIFIED;
};

// all-reduce x communication, all-reduce-major. A modelled world of one rank
// has no collectives, so it gets one choice, the default (unset, as in
// configs stored without the fields): listing the dimensions never
// duplicates such points.
// A MEASURED world of one is a gang of one whose collectives run for real
// (NCCL at world 1, the one-shot kernel): what one GPU can measure of the
// gang's path, so each listed all-reduce is a point. Unset lists give the
// default too, so a space that lists neither keeps the configs, keys and
// hashes of sweeps stored without these fields.
std::vector<CommChoice> CommChoicesFor(const v1::SearchSpace& space, int tp,
                                       int ep) {
  std::vector<v1::AllReduceImpl> impls;
  for (int impl : space.all_reduce_impls()) {
    impls.push_back(static_cast<v1::AllReduceImpl>(impl));
  }
  if (impls.empty()) impls.push_back(v1::ALL_REDUCE_IMPL_UNSPECIFIED);
  std::vector<v1::Communication> modes;
  for (int mode : space.communication()) {
    modes.push_back(static_cast<v1::Communication>(mode));
  }
  if (modes.empty()) modes.push_back(v1::COMMUNICATION_UNSPECIFIED);
  std::vector<CommChoice> choices;
  if (tp * ep == 1) {
    choices.push_back(CommChoice{});
    if (std::find(modes.begin(), modes.end(), v1::MEASURED) == modes.end()) {
      return choices;
    }
    modes = {v1::MEASURED};
  }
  for (v1::AllReduceImpl impl : impls) {
    for (v1::Communication mode : modes) choices.push_back({impl, mode});
  }
  return choices;
}

// The attention splits of a (tp, ep) layout at a batch: each listed one,
// or one unset (tp) when the space lists none, so a space without the
// dimension keeps the configs, keys and hashes of sweeps stored without it.
// At one rank dp is tp (the whole batch, nothing to split): a world of one
// gets the unset choice once. dp needs the batch to split evenly over the
// ranks (each decodes batch / (tp * ep) sequences), so a batch that does
// not is left out.
std::vector<v1::AttentionSplit> AttentionsFor(const v1::SearchSpace& space,
                                              int tp, int ep, int batch) {
  if (tp * ep == 1 || space.attention_splits().empty()) {
    return {v1::ATTENTION_SPLIT_UNSPECIFIED};
  }
  std::vector<v1::AttentionSplit> splits;
  for (int split : space.attention_splits()) {
    if (split == v1::ATTENTION_DP && batch % (tp * ep) != 0) continue;
    splits.push_back(static_cast<v1::AttentionSplit>(split));
  }
  return splits;
}

// The point of a layout's config: its (tp, ep) and attention.
struct Layout {
  int tp = 1;
  int ep = 1;
  // As listed; unset when the space lists none.
  v1::AttentionSplit attention = v1::ATTENTION_SPLIT_UNSPECIFIED;
};

v1::TrialConfig MakeConfig(const backends::BackendDescriptor& backend,
                           const std::optional<backends::Tile>& tile,
                           const Layout& layout, bool graph,
                           const CommChoice& comm) {
  v1::TrialConfig config;
  config.set_moe_backend(std::string(backend.name));
  if (tile.has_value()) {
    *config.mutable_tile() = backends::TileShapeOf(*tile);
  }
  config.set_tp(layout.tp);
  config.set_ep(layout.ep);
  config.set_cuda_graph(graph);
  config.set_all_reduce_impl(comm.all_reduce);
  config.set_communication(comm.communication);
  config.set_attention_split(layout.attention);
  return config;
}

// Whether the whole decode step can be laid out over tp * ep ranks so
// (attention heads, vocabulary, dense MLP split over the world, or whole
// under dp attention: kernels/reference/step_spec.h).
bool StepSplits(const model::ModelConfig& preset, const Layout& layout) {
  const ref::Shard shard{layout.tp, layout.ep, 0,
                         layout.attention == v1::ATTENTION_DP};
  return ref::ValidateStepShard(preset, shard).ok();
}

// Appends tile x cuda_graph x all-reduce x communication of one backend's
// layout, keeping what its descriptor can run at this batch. Under dp
// attention the all-reduce names the implementation of its all-gather and
// reduce-scatter (NCCL's or the one-shot kernel's).
void AppendLayoutConfigs(const backends::BackendDescriptor& backend,
                         const v1::SearchSpace& space,
                         const model::ModelConfig& preset, int batch,
                         const Layout& layout,
                         std::vector<v1::TrialConfig>& configs) {
  const backends::LayerShape shape{preset.hidden,
                                   preset.moe_intermediate / layout.tp, batch};
  for (const std::optional<backends::Tile>& tile :
       TilesFor(backend, space, shape)) {
    if (!backend.CanImplement(shape, tile.value_or(backends::Tile{})).empty()) {
      continue;
    }
    for (bool graph : GraphModesFor(backend, space)) {
      for (const CommChoice& comm :
           CommChoicesFor(space, layout.tp, layout.ep)) {
        configs.push_back(MakeConfig(backend, tile, layout, graph, comm));
      }
    }
  }
}

// Appends backend x (tp, ep) x attention x the layout's configs for one
// backend (for a whole step, only the layouts the step can be split in).
// The layout, attention included, varies slower than the tile: a warm
// trial process keeps the shard it generated (weights and caches) only
// while the layout and the backend's weight format stay, so a layout a
// tile made it again and again.
void AppendBackendConfigs(const backends::BackendDescriptor& backend,
                          const v1::SearchSpace& space,
                          const model::ModelConfig& preset, int batch,
                          bool whole_step,
                          std::vector<v1::TrialConfig>& configs) {
  for (int tp : space.tp()) {
    for (int ep : space.ep()) {
      if (space.world_size() != 0 && tp * ep != space.world_size()) continue;
      for (v1::AttentionSplit attention : AttentionsFor(space, tp, ep, batch)) {
        const Layout layout{tp, ep, attention};
        if (whole_step && !StepSplits(preset, layout)) continue;
        AppendLayoutConfigs(backend, space, preset, batch, layout, configs);
      }
    }
  }
}

std::vector<v1::TrialConfig> ConfigsAt(const v1::SearchSpace& space,
                                       const BackendCatalog& catalog,
                                       const model::ModelConfig& preset,
                                       int batch, bool whole_step) {
  std::vector<v1::TrialConfig> configs;
  for (const std::string& name : space.moe_backends()) {
    const backends::BackendDescriptor* backend = catalog.Find(name);
    if (backend != nullptr) {
      AppendBackendConfigs(*backend, space, preset, batch, whole_step, configs);
    }
  }
  return configs;
}

// The KV cache dtypes of the space: each a workload; empty = the default.
std::vector<v1::KvCacheDtype> KvDtypesOf(const v1::WorkloadSpace& space) {
  std::vector<v1::KvCacheDtype> dtypes;
  for (int dtype : space.kv_cache_dtypes()) {
    dtypes.push_back(static_cast<v1::KvCacheDtype>(dtype));
  }
  if (dtypes.empty()) dtypes.push_back(v1::KV_CACHE_DTYPE_UNSPECIFIED);
  return dtypes;
}

v1::Workload MakeWorkload(const v1::WorkloadSpace& space, int batch,
                          int context, v1::KvCacheDtype kv_dtype) {
  v1::Workload workload;
  workload.set_model_preset(space.model_preset());
  workload.set_layers(space.layers());
  workload.set_batch_size(batch);
  workload.set_context_length(context);
  *workload.mutable_routing() = space.routing();
  workload.set_seed(space.seed());
  workload.set_region(space.region());
  workload.set_chain_layers(space.chain_layers());
  if (space.has_quantization()) {
    *workload.mutable_quantization() = space.quantization();
  }
  workload.set_kv_cache_dtype(kv_dtype);
  return CanonicalWorkload(workload);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const SweepPlan>> SweepPlan::Create(
    const v1::SweepSpec& spec) {
  return Create(spec, BackendCatalog());
}

absl::StatusOr<std::shared_ptr<const SweepPlan>> SweepPlan::Create(
    const v1::SweepSpec& spec, const BackendCatalog& catalog) {
  absl::StatusOr<v1::SweepSpec> normalized = NormalizeSpec(spec, catalog);
  if (!normalized.ok()) return normalized.status();
  std::shared_ptr<SweepPlan> plan(new SweepPlan(*std::move(normalized)));
  const int64_t points = plan->PlanConfigs();
  if (points > kMaxSweepPoints) {
    const v1::WorkloadSpace& w = plan->spec().workload();
    return absl::InvalidArgumentError(absl::StrCat(
        "space: ", points, " points (", w.batch_sizes_size(), " batch sizes x ",
        w.context_lengths_size(), " context lengths x ", KvDtypesOf(w).size(),
        " KV cache dtypes x their configs); allowed: at most ", kMaxSweepPoints,
        " a sweep: list fewer values or split the sweep"));
  }
  plan->Expand();
  return plan;
}

std::shared_ptr<const SweepPlan> SweepPlan::FromNormalized(
    const v1::SweepSpec& spec) {
  std::shared_ptr<SweepPlan> plan(new SweepPlan(WithDefaults(spec)));
  plan->PlanConfigs();
  plan->Expand();
  return plan;
}

int64_t SweepPlan::PlanConfigs() {
  const model::ModelConfig* preset =
      model::FindPreset(spec_.workload().model_preset());
  // The stored spec's own record: the plan never depends on which workers
  // are registered now.
  const BackendCatalog catalog = BackendCatalog::Recorded(spec_.space());
  std::map<int, int> list_of_batch;
  int64_t points = 0;
  const int64_t per_batch =
      spec_.workload().context_lengths_size() *
      static_cast<int64_t>(KvDtypesOf(spec_.workload()).size());
  for (int batch : spec_.workload().batch_sizes()) {
    auto [it, fresh] =
        list_of_batch.emplace(batch, static_cast<int>(config_lists_.size()));
    if (fresh) {
      config_lists_.push_back(
          preset == nullptr
              ? std::vector<v1::TrialConfig>{}
              : ConfigsAt(spec_.space(), catalog, *preset, batch,
                          spec_.workload().region() == v1::DECODE_STEP));
    }
    list_of_batch_slot_.push_back(it->second);
    points +=
        per_batch * static_cast<int64_t>(config_lists_[it->second].size());
  }
  return points;
}

void SweepPlan::Expand() {
  const v1::WorkloadSpace& space = spec_.workload();
  for (int b = 0; b < space.batch_sizes_size(); ++b) {
    for (int context : space.context_lengths()) {
      for (v1::KvCacheDtype kv_dtype : KvDtypesOf(space)) {
        workloads_.push_back(
            MakeWorkload(space, space.batch_sizes(b), context, kv_dtype));
        hashes_.push_back(WorkloadHash(workloads_.back()));
        config_list_of_.push_back(list_of_batch_slot_[b]);
      }
    }
  }
}

const std::vector<v1::TrialConfig>& SweepPlan::configs(int i) const {
  return config_lists_[config_list_of_[i]];
}

std::vector<v1::Trial> SweepPlan::Points(int i) const {
  std::vector<v1::Trial> points;
  points.reserve(configs(i).size());
  for (const v1::TrialConfig& config : configs(i)) {
    v1::Trial& trial = points.emplace_back();
    *trial.mutable_workload() = workloads_[i];
    *trial.mutable_config() = config;
    *trial.mutable_measurement() = spec_.measurement();
    trial.set_workload_hash(hashes_[i]);
    trial.set_state(v1::QUEUED);
  }
  return points;
}

std::vector<v1::Trial> SweepPlan::AllPoints() const {
  std::vector<v1::Trial> all;
  for (int i = 0; i < workload_count(); ++i) {
    std::vector<v1::Trial> points = Points(i);
    all.insert(all.end(), std::make_move_iterator(points.begin()),
               std::make_move_iterator(points.end()));
  }
  return all;
}

int64_t SweepPlan::point_count() const {
  int64_t count = 0;
  for (int i = 0; i < workload_count(); ++i) count += configs(i).size();
  return count;
}

}  // namespace moetune::tuner
