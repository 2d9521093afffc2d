// Sweep specs: validation (first error, in field order, with the field path
// and the allowed values), defaults, the canonical form and hash of a
// workload, and the expansion of a spec into its grid of trials. The model
// presets known to the tuner live in a small table here (the model config
// library keeps the full dims; a test can check that the two agree).
// Pure functions over immutable data; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/moetune.pb.h"

namespace moetune::tuner {

// What the tuner needs to know of a model preset.
struct PresetInfo {
  std::string_view name;
  int num_layers;   // decoder layers; a workload's `layers` is 0..num_layers
  int num_experts;  // routed experts; a REPLAYED histogram has one per expert
  int hidden;            // K of gate_up (elements)
  int moe_intermediate;  // K of down before the tp split (elements)
};

// nullptr when `name` is not a known preset.
const PresetInfo* FindPreset(std::string_view name);
// "glm5, tiny": for error messages that list the allowed values.
std::string KnownPresetNames();

// Limits a spec is checked against (inclusive).
inline constexpr int kMaxBatchSize = 4096;
inline constexpr int kMaxContextLength = 1048576;
inline constexpr int kMaxWarmupIterations = 10000;
inline constexpr int kMaxIterations = 100000;
inline constexpr double kMaxTrialTimeoutS = 86400.0;
inline constexpr int kMaxAttempts = 10;

// Defaults that WithDefaults fills in for zero / empty fields.
inline constexpr int kDefaultWarmupIterations = 3;
inline constexpr int kDefaultIterations = 20;
inline constexpr double kDefaultTrialTimeoutS = 120.0;
inline constexpr int kDefaultMaxAttempts = 3;

// OK, or INVALID_ARGUMENT for the first problem in field order (workload,
// space, strategy, measurement), e.g.
//   "space.tp[1]: 3 is not allowed; allowed: 1, 2, 4, 8".
// The message starts with the field path in proto-JSON style and names the
// allowed values. Zero in a measurement field means "default" (proto3 cannot
// tell unset from 0), so warmup_iterations cannot be asked to be 0. Lists
// must not repeat a value (a repeat would only duplicate trials). A `skew` or
// `histogram` set for a distribution that does not use it is an error (it
// usually means the distribution was forgotten). `layers` is checked against
// the preset (0..78 for glm5, 0..4 for tiny).
absl::Status ValidateSweepSpec(const v1::SweepSpec& spec);

// Fills what the spec leaves zero/empty: measurement warmup 3, iterations 20,
// trial_timeout_s 120, max_attempts 3; space tp/ep {1}, cuda_graph {false};
// routing UNIFORM; region DECODE_STEP; strategy GRID. Also canonicalises the
// workload space like CanonicalWorkload (layers 0 -> the preset's count,
// routing fields of other distributions cleared). Does not validate.
v1::SweepSpec WithDefaults(const v1::SweepSpec& spec);

// The workload with defaults applied, so that equal work has equal bytes:
// region UNSPECIFIED -> DECODE_STEP, routing UNSPECIFIED -> UNIFORM, `skew`
// kept only for SKEWED and `histogram` only for REPLAYED, layers 0 -> the
// preset's layer count (when the preset is known).
v1::Workload CanonicalWorkload(const v1::Workload& workload);

// 16 lowercase hex chars: 64-bit FNV-1a over the deterministic serialization
// of CanonicalWorkload(workload). Stable across runs and builds as long as
// the proto's field numbers are (they are append-only).
std::string WorkloadHash(const v1::Workload& workload);

// Validates, applies WithDefaults, and returns the grid in a deterministic,
// workload-major order:
//   batch_sizes x context_lengths            (the workloads, in list order)
//     x moe_backends                         (list order)
//       x tile      backend without tiles: one trial, tile unset;
//                   with tiles: each space.tiles entry in ITS list (spec
//                   order), or its first (default) tile when space.tiles is
//                   empty or names none of its tiles
//         x (tp, ep)  tp-major, kept when world_size == 0 or tp * ep ==
//                     world_size, and only where the (backend, tile) can run
//                     the preset's layer at that tp (TileMisfit in
//                     kernels/backend_catalog.h); a listed tile that fits
//                     nowhere leaves its backend without points
//           x cuda_graph  GPU backends whose region can be captured: the
//                         list; CPU backends and dequant_cublas: false once.
//   a config whose backend has a max_batch below the workload's batch is left
//   out of that workload (fused_gemv_fp8 runs batch 1 only).
// The grid may come out empty; the coordinator rejects such a spec.
// Each trial: workload (canonical), config, measurement, workload_hash,
// state QUEUED; trial_id / sweep_id are left 0 for the coordinator.
// strategy.max_trials > 0 caps the list to its first max_trials entries in
// this order: the first workloads keep all their configs and the cut falls
// in the last kept workload. max_gpu_seconds is a run-time budget for the
// coordinator and is not applied here.
absl::StatusOr<std::vector<v1::Trial>> ExpandSweep(const v1::SweepSpec& spec);

}  // namespace moetune::tuner
