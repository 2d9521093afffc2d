// Sweep specs on their way in: validation (first error, in field order, with
// the field path and the allowed values), defaults and canonical form, done
// once at submission into the normalised spec that is stored; and the
// canonical form and hash of a workload. The model presets are
// kernels/model's, the backends kernels/backends' (their descriptors).
// Pure functions over immutable data; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backends/limits.h"
#include "proto/moetune.pb.h"
#include "tuner/backend_catalog.h"

namespace moetune::tuner {

// Limits a spec is checked against (inclusive).
inline constexpr int kMaxBatchSize = backends::kMaxBatchTokens;
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
// the preset (0..78 for glm5, 0..4 for tiny). The all-reduce and attention
// lists may be written in their legacy strings (space.allreduce,
// space.attention): those are read as NormalizeLegacyFields reads them, and
// messages name the list the spec wrote ("space.attention[1]: 'dp' ...").
// space.moe_backends may name the native backends and the plugin backends
// of `catalog`; any other name is refused with both lists
// (BackendCatalog::AllowedText). A plugin backend times MOE_LAYER only, one
// layer (no chain_layers). space.plugin_backends is not read: the
// coordinator writes it (NormalizeSpec). Without a catalog: the native
// backends only.
absl::Status ValidateSweepSpec(const v1::SweepSpec& spec,
                               const BackendCatalog& catalog);
absl::Status ValidateSweepSpec(const v1::SweepSpec& spec);

// Fills what the spec leaves zero/empty: measurement warmup 3, iterations 20,
// trial_timeout_s 120, max_attempts 3; space tp/ep {1}, cuda_graph {false};
// routing UNIFORM; region DECODE_STEP; strategy GRID. Also canonicalises the
// workload space like CanonicalWorkload (layers 0 -> the preset's count,
// routing fields of other distributions cleared, chain_layers 1 -> 0,
// precisions equal to their default cleared; kv_cache_dtypes is kept as
// listed), and moves the space's legacy all-reduce and attention strings
// into its enum lists (NormalizeLegacyFields; a string that names no value
// is left for ValidateSweepSpec to refuse). Idempotent. Does not validate.
v1::SweepSpec WithDefaults(const v1::SweepSpec& spec);

// ValidateSweepSpec, then WithDefaults: the normalised spec a sweep is
// stored and planned with. chain_layers in it is 0 for one layer (never 1)
// or the chain's length, 2..kMaxChainLayers. space.plugin_backends in it is
// the catalog's record of the listed plugin backends
// (BackendCatalog::RecordFor), whatever the spec had there: empty when every
// listed backend is native.
absl::StatusOr<v1::SweepSpec> NormalizeSpec(const v1::SweepSpec& spec,
                                            const BackendCatalog& catalog);
absl::StatusOr<v1::SweepSpec> NormalizeSpec(const v1::SweepSpec& spec);

// The workload with defaults applied, so that equal work has equal bytes:
// region UNSPECIFIED -> DECODE_STEP, routing UNSPECIFIED -> UNIFORM, `skew`
// kept only for SKEWED and `histogram` only for REPLAYED, layers 0 -> the
// preset's layer count (when the preset is known), chain_layers 1 -> 0 (both
// are one layer; 0 is the canonical form, so hashes of recorded sweeps stay),
// each quantization precision equal to its default cleared (and the map when
// nothing is left), kv_cache_dtype KV_BF16 -> unset. The explicit default is
// never written: a workload that does not use the options has the bytes, and
// the hash, of one written without them (stored hashes stay valid).
v1::Workload CanonicalWorkload(const v1::Workload& workload);

// The map with each group equal to its default cleared. The defaults are
// kernels/reference/step_spec.h's (ref::Quantization's members; the experts
// ref::kExpertPrecision).
v1::QuantizationMap CanonicalQuantization(const v1::QuantizationMap& map);

// 16 lowercase hex chars: 64-bit FNV-1a over the deterministic serialization
// of CanonicalWorkload(workload). Stable across runs and builds as long as
// the proto's field numbers are (they are append-only).
std::string WorkloadHash(const v1::Workload& workload);

}  // namespace moetune::tuner
