#include "kernels/backends/descriptor.h"

#include <algorithm>
#include <cstdio>

#include "kernels/backends/limits.h"

namespace moetune::backends {

std::string TileText(const Tile& tile) {
  if (tile == Tile{}) return "-";
  std::string text =
      std::to_string(tile.block_n) + "x" + std::to_string(tile.block_k);
  if (tile.stages > 0) text += "s" + std::to_string(tile.stages);
  return text;
}

bool ParseTileText(std::string_view text, Tile* tile) {
  if (text.empty() || text == "-") {
    *tile = Tile{};
    return true;
  }
  Tile parsed;
  char extra = 0;
  const std::string s(text);
  const bool staged = std::sscanf(s.c_str(), "%dx%ds%d%c", &parsed.block_n,
                                  &parsed.block_k, &parsed.stages, &extra) == 3;
  if (!staged) parsed.stages = 0;
  const bool plain =
      !staged && std::sscanf(s.c_str(), "%dx%d%c", &parsed.block_n,
                             &parsed.block_k, &extra) == 2;
  if (!(staged || plain) || parsed.block_n <= 0 || parsed.block_k <= 0 ||
      (staged && parsed.stages <= 0)) {
    return false;
  }
  *tile = parsed;
  return true;
}

bool BackendDescriptor::HasTile(const Tile& tile) const {
  return std::find(tiles.begin(), tiles.end(), tile) != tiles.end();
}

Tile BackendDescriptor::DefaultTile() const {
  return tiles.empty() ? Tile{} : tiles.front();
}

Tile BackendDescriptor::TileFor(const LayerShape& shape) const {
  if (measured_best != nullptr) {
    const Tile best = measured_best(shape);
    if (!(best == Tile{}) && CanImplement(shape, best).empty()) return best;
  }
  for (const Tile& tile : tiles) {
    if (CanImplement(shape, tile).empty()) return tile;
  }
  return DefaultTile();
}

std::string BackendDescriptor::TileList() const {
  std::string out;
  for (const Tile& tile : tiles) {
    if (!out.empty()) out += ", ";
    out += TileText(tile);
  }
  return out;
}

std::string BackendDescriptor::CanImplement(const LayerShape& shape,
                                            const Tile& tile) const {
  const std::string who(name);
  if (tiles.empty() && !(tile == Tile{})) {
    return who + " takes no tile (block_n = block_k = 0); got " +
           TileText(tile);
  }
  if (!tiles.empty() && !HasTile(tile)) {
    return who + " has no tile " + TileText(tile) + "; tiles: " + TileList();
  }
  const int most =
      std::min(max_batch > 0 ? max_batch : kMaxBatchTokens, kMaxBatchTokens);
  if (shape.batch < 1 || shape.batch > most) {
    const std::string why =
        max_batch_why.empty() ? "" : " (" + std::string(max_batch_why) + ")";
    const std::string takes =
        most == 1 ? " runs one token"
                  : " takes at most " + std::to_string(most) + " tokens";
    return who + takes + why + "; batch is " + std::to_string(shape.batch);
  }
  return shape_rules == nullptr ? "" : shape_rules(shape, tile);
}

std::string BackendDescriptor::DeviceRefusal(int sm) const {
  if (!is_gpu()) return "";
  const bool fits = gpu.arch_specific ? sm == gpu.min_sm : sm >= gpu.min_sm;
  if (fits) return "";
  const std::string feature =
      gpu.feature.empty() ? "" : " (" + std::string(gpu.feature) + ")";
  return std::string(name) + ": needs sm_" + std::to_string(gpu.min_sm) +
         (gpu.arch_specific ? "a" : "+") + feature + ", device is sm_" +
         std::to_string(sm);
}

}  // namespace moetune::backends
