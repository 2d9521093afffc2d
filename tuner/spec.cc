// Presets, defaults, canonical workloads, hashing and grid expansion. The
// validation half of spec.h is in spec_validate.cc.
#include "tuner/spec.h"

#include <array>
#include <cstdint>
#include <limits>
#include <optional>

#include "absl/strings/str_format.h"
#include "common/stable_hash.h"
#include "common/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "kernels/backend_catalog.h"

namespace moetune::tuner {
namespace {

// Must agree with the model config library's presets (layers, experts).
constexpr std::array<PresetInfo, 2> kPresets = {{
    {"glm5", 78, 256, 6144, 2048},
    {"tiny", 4, 32, 256, 128},
}};

void CanonicaliseRouting(v1::Routing& routing) {
  if (routing.distribution() == v1::Routing::DISTRIBUTION_UNSPECIFIED) {
    routing.set_distribution(v1::Routing::UNIFORM);
  }
  if (routing.distribution() != v1::Routing::SKEWED) routing.clear_skew();
  if (routing.distribution() != v1::Routing::REPLAYED) {
    routing.clear_histogram();
  }
}

int ResolveLayers(const std::string& preset, int layers) {
  const PresetInfo* info = FindPreset(preset);
  return (layers == 0 && info != nullptr) ? info->num_layers : layers;
}

void ApplyMeasurementDefaults(v1::Measurement& m) {
  if (m.warmup_iterations() == 0) {
    m.set_warmup_iterations(kDefaultWarmupIterations);
  }
  if (m.iterations() == 0) m.set_iterations(kDefaultIterations);
  if (m.trial_timeout_s() == 0) m.set_trial_timeout_s(kDefaultTrialTimeoutS);
  if (m.max_attempts() == 0) m.set_max_attempts(kDefaultMaxAttempts);
}

void ApplySpaceDefaults(v1::SearchSpace& space) {
  if (space.tp().empty()) space.add_tp(1);
  if (space.ep().empty()) space.add_ep(1);
  if (space.cuda_graph().empty()) space.add_cuda_graph(false);
}

std::string DeterministicBytes(const google::protobuf::MessageLite& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }  // the coded stream trims `bytes` to what was written when it goes
  return bytes;
}

}  // namespace

const PresetInfo* FindPreset(std::string_view name) {
  for (const PresetInfo& preset : kPresets) {
    if (preset.name == name) return &preset;
  }
  return nullptr;
}

std::string KnownPresetNames() {
  std::string names;
  for (const PresetInfo& preset : kPresets) {
    if (!names.empty()) names += ", ";
    names += preset.name;
  }
  return names;
}

v1::SweepSpec WithDefaults(const v1::SweepSpec& spec) {
  v1::SweepSpec out = spec;
  v1::WorkloadSpace& workload = *out.mutable_workload();
  workload.set_layers(
      ResolveLayers(workload.model_preset(), workload.layers()));
  CanonicaliseRouting(*workload.mutable_routing());
  if (workload.region() == v1::REGION_UNSPECIFIED) {
    workload.set_region(v1::DECODE_STEP);
  }
  ApplySpaceDefaults(*out.mutable_space());
  if (out.strategy().kind() == v1::Strategy::KIND_UNSPECIFIED) {
    out.mutable_strategy()->set_kind(v1::Strategy::GRID);
  }
  ApplyMeasurementDefaults(*out.mutable_measurement());
  return out;
}

v1::Workload CanonicalWorkload(const v1::Workload& workload) {
  v1::Workload out = workload;
  out.set_layers(ResolveLayers(out.model_preset(), out.layers()));
  CanonicaliseRouting(*out.mutable_routing());
  if (out.region() == v1::REGION_UNSPECIFIED) out.set_region(v1::DECODE_STEP);
  if (out.chain_layers() == 1) out.set_chain_layers(0);  // both: one layer
  return out;
}

std::string WorkloadHash(const v1::Workload& workload) {
  return absl::StrFormat(
      "%016x", Fnv1a64(DeterministicBytes(CanonicalWorkload(workload))));
}

namespace {

// The tiles a backend runs (see ExpandSweep in spec.h); std::nullopt is the
// single entry of a backend without tiles, whose config leaves `tile` unset.
std::vector<std::optional<v1::TileShape>> TilesFor(
    const BackendInfo& backend, const v1::SearchSpace& space) {
  if (backend.tiles.empty()) return {std::nullopt};
  std::vector<std::optional<v1::TileShape>> tiles;
  for (const v1::TileShape& tile : space.tiles()) {
    for (const Tile& own : backend.tiles) {
      if (own.block_n == tile.block_n() && own.block_k == tile.block_k()) {
        tiles.push_back(tile);
      }
    }
  }
  if (tiles.empty()) {  // none listed for it: its default (first) tile
    v1::TileShape& tile = tiles.emplace_back().emplace();
    tile.set_block_n(backend.tiles.front().block_n);
    tile.set_block_k(backend.tiles.front().block_k);
  }
  return tiles;
}

// Graph replay is a dimension of GPU backends whose region can be captured.
std::vector<bool> GraphModesFor(const BackendInfo& backend,
                                const v1::SearchSpace& space) {
  if (backend.kind == BackendKind::kCpu) return {false};
  if (!backend.graph_capturable) return {false};
  return {space.cuda_graph().begin(), space.cuda_graph().end()};
}

// A tile that cannot run the preset's layer at this tp is not in the space.
bool TileFits(const BackendInfo& backend,
              const std::optional<v1::TileShape>& tile,
              const PresetInfo& preset, int tp) {
  const Tile shape =
      tile.has_value() ? Tile{tile->block_n(), tile->block_k()} : Tile{};
  return TileMisfit(backend, shape, preset.hidden, preset.moe_intermediate / tp)
      .empty();
}

// Appends backend x tile x (tp, ep) x cuda_graph for one backend.
void AppendBackendConfigs(const BackendInfo& backend,
                          const v1::SearchSpace& space,
                          const PresetInfo& preset,
                          std::vector<v1::TrialConfig>& configs) {
  for (const std::optional<v1::TileShape>& tile : TilesFor(backend, space)) {
    for (int tp : space.tp()) {
      if (!TileFits(backend, tile, preset, tp)) continue;
      for (int ep : space.ep()) {
        if (space.world_size() != 0 && tp * ep != space.world_size()) continue;
        for (bool graph : GraphModesFor(backend, space)) {
          v1::TrialConfig& config = configs.emplace_back();
          config.set_moe_backend(backend.name);
          if (tile.has_value()) *config.mutable_tile() = *tile;
          config.set_tp(tp);
          config.set_ep(ep);
          config.set_cuda_graph(graph);
        }
      }
    }
  }
}

// Every config of the (defaulted, validated) space, in grid order.
std::vector<v1::TrialConfig> ExpandConfigs(const v1::SearchSpace& space,
                                           const PresetInfo& preset) {
  std::vector<v1::TrialConfig> configs;
  for (const std::string& name : space.moe_backends()) {
    const BackendInfo* backend = FindBackend(name);
    if (backend != nullptr) {
      AppendBackendConfigs(*backend, space, preset, configs);
    }
  }
  return configs;
}

// A backend with a batch limit (fused_gemv_fp8: one token) has no points
// at larger batches.
bool RunsBatch(const v1::TrialConfig& config, int batch) {
  const BackendInfo* backend = FindBackend(config.moe_backend());
  return backend == nullptr || backend->max_batch == 0 ||
         batch <= backend->max_batch;
}

v1::Workload MakeWorkload(const v1::WorkloadSpace& space, int batch,
                          int context) {
  v1::Workload workload;
  workload.set_model_preset(space.model_preset());
  workload.set_layers(space.layers());
  workload.set_batch_size(batch);
  workload.set_context_length(context);
  *workload.mutable_routing() = space.routing();
  workload.set_seed(space.seed());
  workload.set_region(space.region());
  workload.set_chain_layers(space.chain_layers());
  return CanonicalWorkload(workload);
}

}  // namespace

absl::StatusOr<std::vector<v1::Trial>> ExpandSweep(const v1::SweepSpec& raw) {
  RETURN_IF_ERROR(ValidateSweepSpec(raw));
  const v1::SweepSpec spec = WithDefaults(raw);
  const std::vector<v1::TrialConfig> configs =
      ExpandConfigs(spec.space(), *FindPreset(spec.workload().model_preset()));
  const size_t cap = spec.strategy().max_trials() > 0
                         ? static_cast<size_t>(spec.strategy().max_trials())
                         : std::numeric_limits<size_t>::max();
  std::vector<v1::Trial> trials;
  for (int batch : spec.workload().batch_sizes()) {
    for (int context : spec.workload().context_lengths()) {
      const v1::Workload workload =
          MakeWorkload(spec.workload(), batch, context);
      const std::string hash = WorkloadHash(workload);
      for (const v1::TrialConfig& config : configs) {
        if (!RunsBatch(config, batch)) continue;
        if (trials.size() >= cap) return trials;
        v1::Trial& trial = trials.emplace_back();
        *trial.mutable_workload() = workload;
        *trial.mutable_config() = config;
        *trial.mutable_measurement() = spec.measurement();
        trial.set_workload_hash(hash);
        trial.set_state(v1::QUEUED);
      }
    }
  }
  return trials;
}

}  // namespace moetune::tuner
