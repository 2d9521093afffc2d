// SweepPlan: one sweep's space, expanded once from its normalised spec and
// kept for the sweep's life (the coordinator caches one a sweep), so that
// proposing the next trials never re-validates, re-defaults or re-expands.
//
// The grid, in a deterministic, workload-major order:
//   batch_sizes x context_lengths x kv_cache_dtypes (empty = one, the
//                                            default): the workloads, in
//                                            list order
//     x moe_backends                         (list order)
//       x (tp, ep)  tp-major, kept when world_size == 0 or tp * ep ==
//                   world_size (and, for a whole step, when the step can
//                   be split so over the ranks)
//         x attention_splits  (list order; empty = one unset value, tp)
//                      where tp * ep > 1, ATTENTION_DP only where tp * ep
//                      divides the batch; unset once at tp * ep == 1 (dp
//                      is tp there). The layout varies slower than the
//                      tile: a warm trial process keeps its shard while
//                      the layout stays
//           x tile      backend without tiles: one config, tile unset;
//                       with tiles: each space.tiles entry among ITS tiles
//                       (spec order), or when space.tiles names none of
//                       them its default tile, or the first of its tiles
//                       that runs the layout where the default does not
//                       (BackendDescriptor::TileFor)
//             x cuda_graph  the list for GPU backends whose region can be
//                           captured; false once for the others
//               x all_reduce_impls x communication  (list order; each
//                           list empty = one unset value) where tp * ep >
//                           1; at tp * ep == 1 unset once (no
//                           collectives), but a MEASURED world of one gets
//                           one point per all-reduce implementation (under
//                           dp attention: the implementation of its
//                           all-gather and reduce-scatter)
//   The space's legacy string lists (allreduce, attention) are read as
//   NormalizeLegacyFields moves them into these (WithDefaults).
//   where a config is kept for a workload only when its backend's
//   descriptor can run it (BackendDescriptor::CanImplement on the preset's
//   layer at that tp and the workload's batch: tile shape rules, batch
//   limits such as fused_gemv_fp8's one token).
//   A plugin backend's descriptor is built from its record in the spec
//   (space.plugin_backends, BackendCatalog): its tiles (the first its
//   default), cuda_graph as its probe said, MOE_LAYER only.
// Points are built when asked for, one workload at a time; the plan itself
// holds the workloads and the distinct config lists, not the grid.
//
// Immutable once made; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/moetune.pb.h"
#include "tuner/backend_catalog.h"

namespace moetune::tuner {

// The most points a sweep's space may have: larger ones are refused with
// their count (a strategy's budget does not make a huge space cheap: every
// proposal reads the sweep's history).
inline constexpr int64_t kMaxSweepPoints = 100000;

class SweepPlan {
 public:
  // Validates `spec` (INVALID_ARGUMENT naming the field and the allowed
  // values), normalises it (NormalizeSpec) and plans it; INVALID_ARGUMENT
  // with the count for a space of more than kMaxSweepPoints points.
  static absl::StatusOr<std::shared_ptr<const SweepPlan>> Create(
      const v1::SweepSpec& spec);
  // The same, where the spec may also name the plugin backends of
  // `catalog`; their records go into the normalised spec
  // (space.plugin_backends) and the plan reads them from there, as
  // FromNormalized does.
  static absl::StatusOr<std::shared_ptr<const SweepPlan>> Create(
      const v1::SweepSpec& spec, const BackendCatalog& catalog);
  // Plans a spec NormalizeSpec already produced (a stored sweep's): not
  // validated again; WithDefaults is re-applied, which leaves a normalised
  // spec as it is.
  static std::shared_ptr<const SweepPlan> FromNormalized(
      const v1::SweepSpec& spec);

  // The normalised spec.
  const v1::SweepSpec& spec() const { return spec_; }
  int workload_count() const { return static_cast<int>(workloads_.size()); }
  // Canonical workload `i` (CanonicalWorkload) and its WorkloadHash.
  const v1::Workload& workload(int i) const { return workloads_[i]; }
  const std::string& workload_hash(int i) const { return hashes_[i]; }
  // Workload i's configs, in grid order.
  const std::vector<v1::TrialConfig>& configs(int i) const;
  // Workload i's points in grid order: QUEUED trials with workload, config,
  // measurement and workload_hash set (ids, rung and keys left to the
  // strategy).
  std::vector<v1::Trial> Points(int i) const;
  // Every point of every workload, in grid order.
  std::vector<v1::Trial> AllPoints() const;
  int64_t point_count() const;

 private:
  explicit SweepPlan(v1::SweepSpec spec) : spec_(std::move(spec)) {}
  // The configs of each distinct batch; then the count of points.
  int64_t PlanConfigs();
  void Expand();

  v1::SweepSpec spec_;
  std::vector<v1::Workload> workloads_;
  std::vector<std::string> hashes_;
  // The configs of each distinct batch size, and which list workload i uses.
  std::vector<std::vector<v1::TrialConfig>> config_lists_;
  std::vector<int> list_of_batch_slot_;  // per batch_sizes entry
  std::vector<int> config_list_of_;      // per workload
};

}  // namespace moetune::tuner
