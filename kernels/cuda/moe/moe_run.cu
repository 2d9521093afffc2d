// RunMoeLayer (kernels/cuda/moe/moe_gpu.h): checks the request (run_checks),
// takes the device's context and weights (run_context), allocates one run's
// buffers (run_buffers), runs each layer of the chain once, untimed, for its
// output and the trusted path's, then times the chain (run_timing).
#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "kernels/backends/registry.h"
#include "kernels/cuda/base/device.cuh"
#include "kernels/cuda/moe/moe_gpu.h"
#include "kernels/cuda/moe/run_buffers.cuh"
#include "kernels/cuda/moe/run_checks.cuh"
#include "kernels/cuda/moe/run_context.cuh"
#include "kernels/cuda/moe/run_timing.cuh"
#include "kernels/cuda/moe/trusted.cuh"

namespace moetune::gpu {
namespace {

LayerArgs MakeArgs(const Geometry& geo, const MoeRunOptions& o,
                   const Launcher& launcher, const Context& ctx,
                   const WeightSet& weights) {
  LayerArgs a;
  a.geo = geo;
  a.tile = RunTile(o, *launcher.descriptor, geo);
  a.gate_up = weights.gate_up;
  a.down = weights.down;
  a.router_w = weights.router.as<uint16_t>();
  a.device = ctx.device;
  a.sm_count = ctx.sm_count;
  a.cublas = ctx.cublas;
  return a;
}

// Appends n device floats to *out.
GpuStatus AppendOut(const float* src, size_t n, std::vector<float>* out) {
  const size_t at = out->size();
  out->resize(at + n);
  MG_CUDA(cudaMemcpy(out->data() + at, src, n * sizeof(float),
                     cudaMemcpyDeviceToHost));
  return OkStatus();
}

// One untimed run of chain layer i (problem layer p.layer + i, args a):
// its output, and the trusted path's for the same layer when asked,
// appended to r; *routed = the experts it routed to.
GpuStatus CheckedRun(Context* ctx, const MoeProblem& p, const MoeRunOptions& o,
                     const Launcher& launcher, const LayerArgs& a,
                     const RunState& st, int i, MoeRunResult* r, int* routed) {
  const AddElapsedSeconds checking(*RealClock::Get(), &r->check_s);
  MG_RETURN_IF_ERROR(launcher.launch(a, st.workspace.get(), ctx->stream));
  MG_CUDA(cudaStreamSynchronize(ctx->stream));
  const size_t bh = static_cast<size_t>(a.geo.batch) * a.geo.hidden;
  MG_RETURN_IF_ERROR(AppendOut(a.buf.y, bh, &r->output));
  MG_CUDA(cudaMemcpy(routed, a.buf.meta + kMetaRouted, sizeof(*routed),
                     cudaMemcpyDeviceToHost));
  if (!o.compute_reference) return OkStatus();
  MoeProblem layer = p;
  layer.layer = p.layer + i;
  MG_RETURN_IF_ERROR(RunTrusted(layer, a.geo, st.x_float, a.buf.bias,
                                a.buf.topk_idx, st.y_ref, ctx->stream));
  return AppendOut(st.y_ref, bh, &r->reference_output);
}

GpuStatus PrepareRun(const MoeProblem& p, const MoeRunOptions& o, Context** ctx,
                     const Launcher** launcher, Geometry* geo) {
  MG_RETURN_IF_ERROR(ValidateProblem(p, o));
  MG_RETURN_IF_ERROR(ResolveLauncher(o, launcher));
  *geo = MakeGeometry(p);
  MG_RETURN_IF_ERROR(CheckCanImplement(*geo, o, *(*launcher)->descriptor));
  MG_RETURN_IF_ERROR(GetContext(o.device, ctx));
  if ((*launcher)->descriptor->gpu.cublas)
    MG_RETURN_IF_ERROR(EnsureCublas(*ctx));
  return OkStatus();
}

// The layers after the first of a chain: their weights and one checked run
// each (CheckedRun); adds their bytes for the experts each routes.
GpuStatus ExtendChain(Context* ctx, const MoeProblem& p, const MoeRunOptions& o,
                      const Launcher& launcher, const RunState& st,
                      std::vector<LayerArgs>* chain, MoeRunResult* r,
                      double* bytes) {
  const LayerArgs first = chain->front();
  MG_RETURN_IF_ERROR(FitChain(ctx, o.chain_layers, first.geo));
  for (int i = 1; i < o.chain_layers; ++i) {
    const WeightSet* w = nullptr;
    MG_RETURN_IF_ERROR(EnsureWeights(ctx, p, o.device, launcher, i, &w));
    LayerArgs a = MakeArgs(first.geo, o, launcher, *ctx, *w);
    a.buf = first.buf;
    int routed = 0;
    MG_RETURN_IF_ERROR(CheckedRun(ctx, p, o, launcher, a, st, i, r, &routed));
    *bytes += MinBytes(a.geo, routed);
    chain->push_back(a);
  }
  return OkStatus();
}

GpuStatus RunLocked(const MoeProblem& p, const MoeRunOptions& o,
                    MoeRunResult* r) {
  Context* ctx = nullptr;
  const Launcher* launcher = nullptr;
  Geometry geo;
  MG_RETURN_IF_ERROR(PrepareRun(p, o, &ctx, &launcher, &geo));
  const WeightSet* weights = nullptr;
  MG_RETURN_IF_ERROR(EnsureWeights(ctx, p, o.device, *launcher, 0, &weights));
  LayerArgs args = MakeArgs(geo, o, *launcher, *ctx, *weights);
  RunState st;
  MG_RETURN_IF_ERROR(AllocRun(p, &args, *launcher, &st));
  MG_RETURN_IF_ERROR(
      CheckedRun(ctx, p, o, *launcher, args, st, 0, r, &r->distinct_experts));
  std::vector<LayerArgs> chain{args};
  double bytes = MinBytes(geo, r->distinct_experts);
  MG_RETURN_IF_ERROR(ExtendChain(ctx, p, o, *launcher, st, &chain, r, &bytes));
  r->bytes = bytes / static_cast<double>(chain.size());
  const AddElapsedSeconds timing(*RealClock::Get(), &r->timed_s);
  return TimeLayers(ctx, *launcher, chain, st.workspace.get(), o,
                    &r->samples_us);
}

}  // namespace

Geometry MakeGeometry(const MoeProblem& p) {
  Geometry g;
  g.batch = p.batch;
  g.hidden = p.dims.hidden;
  g.inter = p.dims.moe_inter;
  g.experts = p.dims.num_experts;
  g.top_k = p.dims.top_k;
  g.scaling = p.dims.routed_scaling;
  const int tp = p.shard.tp, ep = p.shard.ep;
  g.tp_rank = p.shard.rank % tp;
  g.ep_rank = p.shard.rank / tp;
  g.inter_local = g.inter / tp;
  const int per_rank = g.experts / ep;
  g.e_lo = g.ep_rank * per_rank;
  g.e_hi = g.e_lo + per_rank;
  g.num_local = per_rank;
  g.has_shared = (p.dims.num_shared > 0 && g.ep_rank == 0) ? 1 : 0;
  const int64_t routed = static_cast<int64_t>(p.batch) * g.top_k;
  g.max_slots =
      static_cast<int>(std::min<int64_t>(g.num_local, routed)) + g.has_shared;
  g.max_positions = static_cast<int>(routed + g.has_shared * p.batch);
  // Each slot's last tile may be partial: one more than its whole ones.
  g.max_tiles =
      g.max_slots + (g.max_positions + kGroupedTokens - 1) / kGroupedTokens;
  return g;
}

MoeRunResult RunMoeLayer(const MoeProblem& problem,
                         const MoeRunOptions& options) {
  std::lock_guard<std::mutex> lock(DeviceMutex());
  MoeRunResult result;
  const GpuStatus status = RunLocked(problem, options, &result);
  if (!status.ok()) {
    result.status = status.code;
    result.message = status.message;
    result.samples_us.clear();
  }
  return result;
}

}  // namespace moetune::gpu
