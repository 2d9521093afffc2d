#include <cmath>
#include <string>
#include <vector>

#include "kernels/backends/limits.h"
#include "kernels/backends/registry.h"
#include "kernels/cuda/moe/router.cuh"
#include "kernels/cuda/moe/run_checks.cuh"

namespace moetune::gpu {
namespace {

GpuStatus Bad(const std::string& message) {
  return Fail(RunStatus::kBadProblem, message);
}

bool AllFinite(const std::vector<float>& v) {
  for (float f : v) {
    if (!std::isfinite(f)) return false;
  }
  return true;
}

GpuStatus ValidateDims(const MoeProblem& p) {
  const MoeDims& d = p.dims;
  if (d.hidden < 1 || d.moe_inter < 1 || d.num_experts < 1 || d.top_k < 1) {
    return Bad(
        "problem.dims: hidden, moe_inter, num_experts and top_k must be >= 1");
  }
  if (d.top_k > d.num_experts)
    return Bad("problem.dims.top_k: must be <= num_experts");
  if (d.num_shared != 0 && d.num_shared != 1) {
    return Bad("problem.dims.num_shared: must be 0 or 1, got " +
               std::to_string(d.num_shared));
  }
  if (!std::isfinite(d.routed_scaling))
    return Bad("problem.dims.routed_scaling: not finite");
  if (p.batch < 1)
    return Bad("problem.batch: must be >= 1, got " + std::to_string(p.batch));
  if (p.input.size() != static_cast<size_t>(p.batch) * d.hidden) {
    return Bad("problem.input: size must be batch * hidden = " +
               std::to_string(static_cast<int64_t>(p.batch) * d.hidden) +
               ", got " + std::to_string(p.input.size()));
  }
  if (p.router_bias.size() != static_cast<size_t>(d.num_experts)) {
    return Bad("problem.router_bias: size must be num_experts = " +
               std::to_string(d.num_experts) + ", got " +
               std::to_string(p.router_bias.size()));
  }
  if (!AllFinite(p.input)) return Bad("problem.input: has a NaN or infinity");
  if (!AllFinite(p.router_bias))
    return Bad("problem.router_bias: has a NaN or infinity");
  return OkStatus();
}

GpuStatus ValidateShardAndOptions(const MoeProblem& p, const MoeRunOptions& o) {
  const MoeShard& s = p.shard;
  if (s.tp < 1 || s.ep < 1) return Bad("problem.shard: tp and ep must be >= 1");
  if (s.rank < 0 || s.rank >= s.tp * s.ep) {
    return Bad("problem.shard.rank: must be in [0, tp * ep = " +
               std::to_string(s.tp * s.ep) + "), got " +
               std::to_string(s.rank));
  }
  if (p.dims.num_experts % s.ep != 0)
    return Bad("problem.shard.ep: must divide num_experts");
  if (p.dims.moe_inter % s.tp != 0)
    return Bad("problem.shard.tp: must divide moe_inter");
  if (o.iterations < 1) return Bad("options.iterations: must be >= 1");
  if (o.warmup < 0) return Bad("options.warmup: must be >= 0");
  if (o.device < 0) return Bad("options.device: must be >= 0");
  if (o.tile.block_n < 0 || o.tile.block_k < 0 || o.tile.stages < 0)
    return Bad("options.tile: block_n, block_k and stages must be >= 0");
  if (o.chain_layers < 1 || o.chain_layers > backends::kMaxChainLayers) {
    return Bad("options.chain_layers: must be in [1, " +
               std::to_string(backends::kMaxChainLayers) + "], got " +
               std::to_string(o.chain_layers));
  }
  return OkStatus();
}

// "dequant_cublas, fused_gemv, ...": the GPU backends of the list.
std::string GpuBackendNames() {
  std::string names;
  for (const backends::BackendDescriptor* b : backends::AllBackends()) {
    if (!b->is_gpu()) continue;
    if (!names.empty()) names += ", ";
    names += b->name;
  }
  return names;
}

// Limits of the shared router kernel.
GpuStatus CheckRouterLimits(const Geometry& g) {
  if (g.experts <= kRouterMaxExperts && g.top_k <= kRouterMaxTopK &&
      g.hidden <= kRouterMaxHidden) {
    return OkStatus();
  }
  return Fail(
      RunStatus::kCannotImplement,
      "the GPU router takes at most " + std::to_string(kRouterMaxExperts) +
          " experts, top_k <= " + std::to_string(kRouterMaxTopK) +
          " and hidden <= " + std::to_string(kRouterMaxHidden) +
          "; this layer has " + std::to_string(g.experts) + " experts, top_k " +
          std::to_string(g.top_k) + ", hidden " + std::to_string(g.hidden));
}

}  // namespace

GpuStatus ValidateProblem(const MoeProblem& p, const MoeRunOptions& o) {
  MG_RETURN_IF_ERROR(ValidateDims(p));
  return ValidateShardAndOptions(p, o);
}

GpuStatus ResolveLauncher(const MoeRunOptions& o, const Launcher** launcher) {
  const backends::BackendDescriptor* backend = backends::FindBackend(o.backend);
  if (backend == nullptr || !backend->is_gpu()) {
    return Bad("options.backend: '" + o.backend +
               "' is not a GPU backend; allowed: " + GpuBackendNames());
  }
  const BackendAvailability a = ProbeMoeBackend(o.backend, o.device);
  if (!a.available)
    return Fail(RunStatus::kUnavailable, o.backend + ": " + a.reason);
  *launcher = FindLauncher(o.backend);
  if (*launcher == nullptr)
    return Fail(RunStatus::kUnavailable, o.backend + ": not built");
  return OkStatus();
}

backends::Tile RunTile(const MoeRunOptions& o,
                       const backends::BackendDescriptor& backend,
                       const Geometry& g) {
  if (!(o.tile == backends::Tile{})) return o.tile;
  return backend.TileFor({g.hidden, g.inter_local, g.batch});
}

GpuStatus CheckCanImplement(const Geometry& g, const MoeRunOptions& o,
                            const backends::BackendDescriptor& backend) {
  MG_RETURN_IF_ERROR(CheckRouterLimits(g));
  const std::string why = backend.CanImplement(
      {g.hidden, g.inter_local, g.batch}, RunTile(o, backend, g));
  if (!why.empty()) return Fail(RunStatus::kCannotImplement, why);
  if (o.cuda_graph && !backend.graph_capturable) {
    return Fail(
        RunStatus::kCannotImplement,
        o.backend +
            " copies the routing to the host mid-layer (per-expert cuBLAS "
            "shapes), so it cannot be captured in a CUDA graph");
  }
  return OkStatus();
}

}  // namespace moetune::gpu
