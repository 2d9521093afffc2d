#include "tuner/backend_catalog.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/backends/registry.h"
#include "kernels/backends/tile_shape.h"

namespace moetune::tuner {

// One plugin backend: its record and the descriptor whose views point into
// it (so it is never moved once made).
struct BackendCatalog::Plugin {
  v1::BackendProbe record;
  std::string description;
  std::vector<backends::Tile> tiles;
  backends::BackendDescriptor descriptor;
};

namespace {

bool IsPluginProbe(const v1::BackendProbe& probe) {
  return !probe.plugin().empty() && !probe.name().empty() &&
         backends::FindBackend(probe.name()) == nullptr;
}

void AddTileOnce(const v1::TileShape& tile, v1::BackendProbe* record) {
  const backends::Tile wanted = backends::TileOf(tile);
  for (const v1::TileShape& have : record->tiles()) {
    if (backends::TileOf(have) == wanted) return;
  }
  *record->add_tiles() = tile;
}

// One backend's record from every probe offering it (see FromProbes).
v1::BackendProbe Merge(const std::vector<const v1::BackendProbe*>& offers) {
  bool any_available = false;
  for (const v1::BackendProbe* offer : offers) {
    any_available = any_available || offer->available();
  }
  v1::BackendProbe record;
  record.set_name(offers.front()->name());
  record.set_plugin(offers.front()->plugin());
  for (const v1::BackendProbe* offer : offers) {
    if (any_available && !offer->available()) continue;
    for (const v1::TileShape& tile : offer->tiles()) AddTileOnce(tile, &record);
    record.set_graph_capturable(record.graph_capturable() ||
                                offer->graph_capturable());
    record.set_runs_on_gpu(record.runs_on_gpu() || offer->runs_on_gpu());
  }
  return record;
}

}  // namespace

std::shared_ptr<const BackendCatalog::Plugin> BackendCatalog::MakePlugin(
    v1::BackendProbe record) {
  auto plugin = std::make_shared<Plugin>();
  plugin->record = std::move(record);
  for (const v1::TileShape& tile : plugin->record.tiles()) {
    plugin->tiles.push_back(backends::TileOf(tile));
  }
  plugin->description =
      absl::StrCat("out-of-process backend: ", plugin->record.plugin());
  backends::BackendDescriptor& d = plugin->descriptor;
  d.name = plugin->record.name();
  d.description = plugin->description;
  d.placement = plugin->record.runs_on_gpu() ? backends::Placement::kGpu
                                             : backends::Placement::kCpu;
  d.tiles = plugin->tiles;
  d.graph_capturable = plugin->record.graph_capturable();
  return plugin;
}

BackendCatalog BackendCatalog::FromProbes(
    const std::vector<v1::Probe>& probes) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const v1::BackendProbe*>> offers;
  for (const v1::Probe& probe : probes) {
    for (const v1::BackendProbe& backend : probe.backends()) {
      if (!IsPluginProbe(backend)) continue;
      auto& list = offers[backend.name()];
      if (list.empty()) order.push_back(backend.name());
      list.push_back(&backend);
    }
  }
  BackendCatalog catalog;
  for (const std::string& name : order) {
    catalog.plugins_.emplace(name, MakePlugin(Merge(offers[name])));
  }
  return catalog;
}

BackendCatalog BackendCatalog::Recorded(const v1::SearchSpace& space) {
  BackendCatalog catalog;
  for (const v1::BackendProbe& record : space.plugin_backends()) {
    if (backends::FindBackend(record.name()) != nullptr) continue;
    catalog.plugins_.emplace(record.name(), MakePlugin(record));
  }
  return catalog;
}

const backends::BackendDescriptor* BackendCatalog::Find(
    std::string_view name) const {
  if (const backends::BackendDescriptor* native = backends::FindBackend(name)) {
    return native;
  }
  auto it = plugins_.find(name);
  return it == plugins_.end() ? nullptr : &it->second->descriptor;
}

bool BackendCatalog::IsPlugin(std::string_view name) const {
  return plugins_.find(name) != plugins_.end();
}

std::string BackendCatalog::AllowedText() const {
  std::vector<std::string> names;
  for (const auto& [name, plugin] : plugins_) names.push_back(name);
  return absl::StrCat("native: ", backends::KnownBackendNames(),
                      "; plugin backends of the registered workers: ",
                      names.empty() ? "none" : absl::StrJoin(names, ", "));
}

std::vector<v1::BackendProbe> BackendCatalog::RecordFor(
    const v1::SearchSpace& space) const {
  std::vector<v1::BackendProbe> records;
  for (const std::string& name : space.moe_backends()) {
    auto it = plugins_.find(name);
    if (it != plugins_.end()) records.push_back(it->second->record);
  }
  return records;
}

}  // namespace moetune::tuner
