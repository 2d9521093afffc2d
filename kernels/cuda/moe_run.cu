// RunMoeLayer (kernels/cuda/moe_gpu.h): validation, the per-device context
// (stream, cuBLAS handle, L2-flush buffer, cached weights), one run's
// buffers, the untimed checked run, the trusted reference, and the timing.
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend_catalog.h"
#include "kernels/cuda/backends.cuh"
#include "kernels/cuda/chain_budget.h"
#include "kernels/cuda/device_probe.cuh"
#include "kernels/cuda/moe_gpu.h"
#include "kernels/cuda/router.cuh"
#include "kernels/cuda/trusted.cuh"
#include "kernels/cuda/weights.cuh"
#include "kernels/nvfp4_format.h"

namespace moetune::gpu {
namespace {

constexpr size_t kFlushBytes = size_t{192} << 20;  // > 3x the 60 MB L2
constexpr int kMaxBatch = 4096;

struct Context {
  int device = -1;
  int sm_count = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  DeviceBuffer flush, sink;
  WeightSet weights;
  // The weights of the layers after problem.layer in a chain
  // (options.chain_layers), generated as the chain first needs them.
  std::vector<std::unique_ptr<WeightSet>> chain;
  ~Context() {
    if (cublas != nullptr) cublasDestroy(cublas);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

std::unique_ptr<Context>& ContextSlot() {
  static auto* slot = new std::unique_ptr<Context>;
  return *slot;
}

GpuStatus GetContext(int device, Context** out) {
  std::unique_ptr<Context>& ctx = ContextSlot();
  MG_CUDA(cudaSetDevice(device));
  if (ctx == nullptr || ctx->device != device) {
    ctx.reset();
    auto fresh = std::make_unique<Context>();
    fresh->device = device;
    MG_CUDA(cudaDeviceGetAttribute(&fresh->sm_count,
                                   cudaDevAttrMultiProcessorCount, device));
    MG_CUDA(cudaStreamCreateWithFlags(&fresh->stream, cudaStreamNonBlocking));
    MG_RETURN_IF_ERROR(fresh->flush.Allocate(kFlushBytes));
    MG_RETURN_IF_ERROR(fresh->sink.Allocate(256));
    ctx = std::move(fresh);
  }
  *out = ctx.get();
  return OkStatus();
}

GpuStatus EnsureCublas(Context* ctx) {
  if (ctx->cublas != nullptr) return OkStatus();
  const cublasStatus_t s = cublasCreate(&ctx->cublas);
  if (s != CUBLAS_STATUS_SUCCESS) {
    ctx->cublas = nullptr;
    return Fail(RunStatus::kCudaError,
                std::string("cublasCreate: ") + cublasGetStatusName(s));
  }
  return OkStatus();
}

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
  if (o.block_n < 0 || o.block_k < 0)
    return Bad("options.block_n/block_k: must be >= 0");
  if (o.chain_layers < 1 || o.chain_layers > kMaxChainLayers) {
    return Bad("options.chain_layers: must be in [1, " +
               std::to_string(kMaxChainLayers) + "], got " +
               std::to_string(o.chain_layers));
  }
  return OkStatus();
}

GpuStatus ResolveBackend(const MoeRunOptions& o, const BackendOps** ops) {
  const BackendInfo* info = FindBackend(o.backend);
  if (info == nullptr || info->kind == BackendKind::kCpu) {
    return Bad("options.backend: '" + o.backend +
               "' is not a GPU backend; allowed: dequant_cublas, fused_gemv, "
               "fused_gemv_fp8, grouped_mma, native_fp4");
  }
  const BackendAvailability a = ProbeMoeBackend(o.backend, o.device);
  if (!a.available)
    return Fail(RunStatus::kUnavailable, o.backend + ": " + a.reason);
  *ops = FindBackendOps(o.backend);
  if (*ops == nullptr)
    return Fail(RunStatus::kUnavailable, o.backend + ": not built");
  return OkStatus();
}

// Limits of the shared router kernel and of the run buffers.
GpuStatus CheckLimits(const Geometry& g, const MoeRunOptions& o,
                      const BackendOps& ops) {
  if (g.experts > kRouterMaxExperts || g.top_k > kRouterMaxTopK ||
      g.hidden > kRouterMaxHidden) {
    return Fail(RunStatus::kCannotImplement,
                "the GPU router takes at most " +
                    std::to_string(kRouterMaxExperts) +
                    " experts, top_k <= " + std::to_string(kRouterMaxTopK) +
                    " and hidden <= " + std::to_string(kRouterMaxHidden) +
                    "; this layer has " + std::to_string(g.experts) +
                    " experts, top_k " + std::to_string(g.top_k) + ", hidden " +
                    std::to_string(g.hidden));
  }
  if (g.batch > kMaxBatch) {
    return Fail(RunStatus::kCannotImplement,
                "batch above 4096 tokens is not supported");
  }
  if (o.cuda_graph && !ops.graph_capturable) {
    return Fail(
        RunStatus::kCannotImplement,
        o.backend +
            " copies the routing to the host mid-layer (per-expert cuBLAS "
            "shapes), so it cannot be captured in a CUDA graph");
  }
  return OkStatus();
}

uint16_t Bf16Bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// One run's device memory: RunBuffers, the trusted path's input and output,
// and the backend's workspace.
struct RunState {
  DeviceBuffer main, workspace;
  float* x_float = nullptr;  // trusted input
  float* y_ref = nullptr;    // trusted output
};

GpuStatus AllocRun(const MoeProblem& p, LayerArgs* a, const BackendOps& ops,
                   RunState* st) {
  const Geometry& g = a->geo;
  const size_t bh = static_cast<size_t>(g.batch) * g.hidden, k = g.top_k;
  const size_t s = g.max_slots, pos = g.max_positions, il = g.inter_local;
  // One list of the buffers: run once with no memory to size them, then
  // over the allocation (a second, hand-kept list of sizes once fell out of
  // step with it and overran the allocation).
  RunBuffers& b = a->buf;
  const bool fp8 =  // fused_gemv_fp8, the one backend with FP8 activations
      ops.weight_layout == WeightLayout::kE4m3Bits;
  uint16_t* x_bf16 = nullptr;
  float* bias = nullptr;
  auto carve = [&](Carver& c) {
    x_bf16 = c.Take<uint16_t>(bh);
    bias = c.Take<float>(g.experts);
    b.x16 = c.Take<__half>(bh);
    b.logits = c.Take<float>(size_t(g.batch) * g.experts);
    b.router_counter = c.Take<int>(1);
    b.topk_idx = c.Take<int>(g.batch * k);
    b.topk_w = c.Take<float>(g.batch * k);
    b.tok_pos = c.Take<int>(g.batch * (k + 1));
    b.meta = c.Take<int>(4);
    b.slot_expert = c.Take<int>(std::max<size_t>(s, 32));  // a warp reads 32
    b.slot_tok_off = c.Take<int>(s);
    b.slot_ntok = c.Take<int>(s);
    b.tile_prefix = c.Take<int>(s + 1);
    b.tok_list = c.Take<int>(pos);
    b.tok_w = c.Take<float>(pos);
    b.gu_partial = c.Take<float>(pos * 2 * il);
    b.gu_counters = c.Take<int>(s * (il / 8 + 1));
    b.h = c.Take<__half>(pos * il);
    b.y = c.Take<float>(bh);
    if (fp8) {  // only its backend reads them (8 bytes a value)
      b.x_fp8 = c.Take<uint8_t>(bh * 8);  // zero where no value goes
      b.x_fp8_inv = c.Take<float>(bh / 16);
      b.h_fp8 = c.Take<uint8_t>(pos * il * 8);
      b.h_fp8_inv = c.Take<float>(pos * il / 16);
    }
#ifdef MOETUNE_TIMELINE  // only that build's kernels write the stamps
    b.timeline = c.Take<unsigned long long>(kTimelineWords);
#endif
    st->x_float = c.Take<float>(bh);
    st->y_ref = c.Take<float>(bh);
  };
  Carver sizing(nullptr);
  carve(sizing);
  MG_RETURN_IF_ERROR(st->main.Allocate(sizing.used()));
  Carver c(st->main.get());
  carve(c);
  b.x_bf16 = x_bf16;
  b.bias = bias;
  MG_RETURN_IF_ERROR(st->workspace.Allocate(ops.workspace_bytes(*a)));
  // Upload: the input rounded to BF16, as bits for the kernels and as floats
  // for the trusted path; the bias as given.
  std::vector<uint16_t> bits(bh);
  std::vector<float> rounded(bh);
  for (size_t i = 0; i < bh; ++i) {
    bits[i] = Bf16Bits(p.input[i]);
    rounded[i] = Bf16ToFloat(bits[i]);
  }
  MG_CUDA(cudaMemcpy(x_bf16, bits.data(), bh * 2, cudaMemcpyHostToDevice));
  MG_CUDA(
      cudaMemcpy(st->x_float, rounded.data(), bh * 4, cudaMemcpyHostToDevice));
  MG_CUDA(cudaMemcpy(bias, p.router_bias.data(), g.experts * 4,
                     cudaMemcpyHostToDevice));
  MG_CUDA(cudaDeviceSynchronize());  // the zero fills ran on the legacy stream
  return OkStatus();
}

// Bytes the rank must at least move (same definition as the CPU reference's
// MoeLayerBytes): router, each distinct owned expert's slice once, the shared
// slice, BF16 input and output.
// One expert's gate_up and down on this rank: E2M1 codes (half a byte a
// weight) and E4M3 scales (one a block of 16).
double ExpertSliceBytes(const Geometry& g) {
  const double weights = 3.0 * g.inter_local * g.hidden;
  return weights * 0.5 + weights / 16.0;
}

double MinBytes(const Geometry& g, int distinct) {
  return 2.0 * g.experts * g.hidden +
         (distinct + g.has_shared) * ExpertSliceBytes(g) +
         2.0 * 2.0 * g.batch * g.hidden;
}

struct EventPool {
  std::vector<cudaEvent_t> events;
  ~EventPool() {
    for (cudaEvent_t e : events) cudaEventDestroy(e);
  }
  GpuStatus Create(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      cudaEvent_t e;
      MG_CUDA(cudaEventCreate(&e));
      events.push_back(e);
    }
    return OkStatus();
  }
};

struct GraphHolder {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~GraphHolder() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
};

// The chain's layers one after the other on `stream`.
GpuStatus LaunchChain(const BackendOps& ops,
                      const std::vector<LayerArgs>& chain, void* ws,
                      cudaStream_t stream) {
  for (const LayerArgs& a : chain)
    MG_RETURN_IF_ERROR(ops.launch(a, ws, stream));
  return OkStatus();
}

GpuStatus Capture(const BackendOps& ops, const std::vector<LayerArgs>& chain,
                  void* ws, cudaStream_t stream, GraphHolder* g) {
  MG_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const GpuStatus launched = LaunchChain(ops, chain, ws, stream);
  const cudaError_t ended = cudaStreamEndCapture(stream, &g->graph);
  MG_RETURN_IF_ERROR(launched);
  MG_CUDA(ended);
  MG_CUDA(cudaGraphInstantiate(&g->exec, g->graph, 0));
  return OkStatus();
}

#ifdef MOETUNE_TIMELINE
// Stamp v in us from the router's start (stamp 0).
double UsFromStart(const std::vector<unsigned long long>& t,
                   unsigned long long v) {
  return (static_cast<double>(v) - static_cast<double>(t[0])) / 1e3;
}

// Quantile q of v (the element at q x (size - 1) once sorted).
double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

// Percentiles of gate_up's per-warp stamps (us from the router's start),
// and where the 1 % of warps that end last started and were released.
void PrintWarpSpread(const std::vector<unsigned long long>& t) {
  struct W {
    double start, shared, released, end;
  };
  std::vector<W> ws;
  for (int w = 0; w < kTimelineGateUpWarps; ++w) {
    const unsigned long long* f =
        t.data() + kTimelineSlots + kTimelineWarpFields * w;
    if (f[0] == 0 || f[3] == 0) continue;
    ws.push_back({UsFromStart(t, f[0]), UsFromStart(t, f[1]),
                  UsFromStart(t, f[2]), UsFromStart(t, f[3])});
  }
  if (ws.empty()) return;
  auto pct = [&](double W::*m, double q) {
    std::vector<double> v;
    for (const W& x : ws) v.push_back(x.*m);
    return Quantile(std::move(v), q);
  };
  std::fprintf(stderr, "  warps %zu (p10/p50/p90/max):", ws.size());
  const std::pair<const char*, double W::*> fields[] = {
      {"start", &W::start},
      {"shared", &W::shared},
      {"released", &W::released},
      {"end", &W::end}};
  for (const auto& [name, m] : fields) {
    std::fprintf(stderr, " %s %.1f/%.1f/%.1f/%.1f", name, pct(m, 0.1),
                 pct(m, 0.5), pct(m, 0.9), pct(m, 1.0));
  }
  std::sort(ws.begin(), ws.end(),
            [](const W& x, const W& y) { return x.end > y.end; });
  const size_t n = std::max<size_t>(1, ws.size() / 100);
  double s = 0, r = 0, e = 0;
  for (size_t i = 0; i < n; ++i) {
    s += ws[i].start;
    r += ws[i].released;
    e += ws[i].end;
  }
  std::fprintf(stderr,
               " | last-ending 1%%: start %.1f released %.1f end %.1f\n", s / n,
               r / n, e / n);
}

// Percentiles of the router's per-block stamps (us from the router's start)
// and the blocks whose scores were written last.
void PrintRouterSpread(const std::vector<unsigned long long>& t) {
  struct B {
    int id;
    double f[kTimelineWarpFields];
  };
  std::vector<B> bs;
  for (int b = 0; b < kRouterMaxExperts; ++b) {  // one block an expert
    const unsigned long long* f =
        t.data() + kTimelineSlots +
        kTimelineWarpFields * (kTimelineGateUpWarps + b);
    if (f[0] == 0 || f[3] == 0) continue;
    B x{b, {}};
    for (int i = 0; i < kTimelineWarpFields; ++i) x.f[i] = UsFromStart(t, f[i]);
    bs.push_back(x);
  }
  if (bs.empty()) return;
  const char* names[] = {"start", "landed", "scores", "ticket"};
  std::fprintf(stderr, "  router blocks %zu (min/p10/p50/p90/max):", bs.size());
  for (int i = 0; i < kTimelineWarpFields; ++i) {
    std::vector<double> v;
    for (const B& x : bs) v.push_back(x.f[i]);
    std::fprintf(stderr, " %s %.2f/%.2f/%.2f/%.2f/%.2f", names[i],
                 Quantile(v, 0), Quantile(v, 0.1), Quantile(v, 0.5),
                 Quantile(v, 0.9), Quantile(v, 1.0));
  }
  std::sort(bs.begin(), bs.end(),
            [](const B& x, const B& y) { return x.f[2] > y.f[2]; });
  std::fprintf(
      stderr,
      "\n  router blocks written last (id: start landed scores ticket):");
  for (size_t i = 0; i < std::min<size_t>(6, bs.size()); ++i) {
    std::fprintf(stderr, " %d: %.2f %.2f %.2f %.2f;", bs[i].id, bs[i].f[0],
                 bs[i].f[1], bs[i].f[2], bs[i].f[3]);
  }
  std::fprintf(stderr, "\n");
}

// gate_up's warps (fused_gemv_fp8 diagnostics): end against unit count,
// SM and when their first and last units landed.
void PrintGateUpDiagnostics(const std::vector<unsigned long long>& t) {
  auto at = [&](int idx, int f) {
    return t[kTimelineSlots + kTimelineWarpFields * idx + f];
  };
  auto us = [&](unsigned long long v) { return UsFromStart(t, v); };
  struct W {
    int w, sm, units;
    double first, last, end;
  };
  std::vector<W> ws;
  for (int w = 0; w < kTimelineGateUpDiagWarps; ++w) {
    const int idx = kTimelineGateUpDiag + w;
    if (at(idx, 3) == 0 || at(w, 3) == 0) continue;
    ws.push_back({w, static_cast<int>(at(idx, 0)), static_cast<int>(at(idx, 1)),
                  us(at(idx, 3)), us(at(idx, 2)), us(at(w, 3))});
  }
  if (ws.empty()) return;
  double sum[64] = {}, n[64] = {};
  for (const W& x : ws) {
    sum[std::min(x.units, 63)] += x.end;
    n[std::min(x.units, 63)] += 1;
  }
  std::fprintf(stderr, "  gate_up end by units:");
  for (int u = 0; u < 64; ++u)
    if (n[u] > 0)
      std::fprintf(stderr, " %d: %.0f warps %.2f;", u, n[u], sum[u] / n[u]);
  std::vector<double> tail;
  for (const W& x : ws) tail.push_back(x.end - x.last);
  std::sort(tail.begin(), tail.end());
  std::fprintf(stderr, " end - last landed p50 %.2f max %.2f\n",
               tail[tail.size() / 2], tail.back());
  std::sort(ws.begin(), ws.end(),
            [](const W& a, const W& b) { return a.end > b.end; });
  std::fprintf(stderr,
               "  gate_up warps ending last (warp sm units first last end):");
  for (size_t i = 0; i < std::min<size_t>(12, ws.size()); ++i)
    std::fprintf(stderr, " %d %d %d %.2f %.2f %.2f;", ws[i].w, ws[i].sm,
                 ws[i].units, ws[i].first, ws[i].last, ws[i].end);
  std::fprintf(stderr, "\n  gate_up warps ending first:");
  for (size_t i = ws.size() - std::min<size_t>(6, ws.size()); i < ws.size();
       ++i)
    std::fprintf(stderr, " %d %d %d %.2f %.2f %.2f;", ws[i].w, ws[i].sm,
                 ws[i].units, ws[i].first, ws[i].last, ws[i].end);
  std::fprintf(stderr, "\n");
}

// The rate fused_gemv_fp8's weights land at, in TB/s a 1-us bin from the
// router's start (gate_up and down together): each stage stamp counts one
// unit's weight bytes. A stamp is taken when warp 0 waits for the stage,
// so a stage that landed while warp 0 still computed counts late.
void PrintLandingRate(const std::vector<unsigned long long>& t,
                      const LayerArgs& a, const MoeRunOptions& o) {
  constexpr int kBins = 200, kPerMode = kTimelineUnitStamps;
  std::vector<double> bins(kBins, 0.0);
  int last = -1, units[2] = {};
  const MatrixView* views[2] = {&a.gate_up, &a.down};
  for (int mode = 0; mode < 2; ++mode) {
    const MatrixView& w = *views[mode];
    const double per_slot = static_cast<double>(w.rows) * w.k /
                            (static_cast<double>(o.block_n) * o.block_k);
    const double unit_bytes = (w.code_stride + w.scale_stride) / per_slot;
    for (int i = 0; i < kPerMode; ++i) {
      const unsigned long long v = t[kTimelineLandings + mode * kPerMode + i];
      if (v == 0) continue;
      const int bin = static_cast<int>(UsFromStart(t, v));
      if (bin < 0 || bin >= kBins) continue;
      bins[bin] += unit_bytes;
      last = std::max(last, bin);
      ++units[mode];
    }
  }
  if (last < 0) return;
  std::fprintf(stderr,
               "  weights landed, TB/s per us (gate_up %d units, down %d):",
               units[0], units[1]);
  for (int i = 0; i <= last; ++i)
    std::fprintf(stderr, " %d:%.2f", i, bins[i] / 1e6);
  std::fprintf(stderr, "\n");
}

// Percentiles of warp 0's compute a unit (landed -> computed stamps), for
// gate_up and down.
void PrintUnitCompute(const std::vector<unsigned long long>& t) {
  constexpr int kPerMode = kTimelineUnitStamps;
  std::fprintf(stderr, "  warp 0's compute a unit, us (p10/p50/p90):");
  for (int mode = 0; mode < 2; ++mode) {
    std::vector<double> c;
    for (int i = 0; i < kPerMode; ++i) {
      const unsigned long long l = t[kTimelineLandings + mode * kPerMode + i];
      const unsigned long long e = t[kTimelineComputed + mode * kPerMode + i];
      if (l != 0 && e > l) c.push_back((e - l) / 1e3);
    }
    if (c.empty()) continue;
    std::fprintf(stderr, " %s %.2f/%.2f/%.2f", mode == 0 ? "gate_up" : "down",
                 Quantile(c, 0.1), Quantile(c, 0.5), Quantile(c, 0.9));
  }
  std::fprintf(stderr, "\n");
}

// A build with -DMOETUNE_TIMELINE (a measurement aid, PERF.md version 10):
// one more run of the layer with the kernels' %globaltimer probes
// (layer.cuh), printed to stderr in us from the router's start.
GpuStatus PrintTimeline(Context* ctx, const BackendOps& ops, const LayerArgs& a,
                        void* ws, const MoeRunOptions& o,
                        const GraphHolder& graph) {
  std::vector<unsigned long long> t(kTimelineWords, 0);
  for (int i = 0; i < kTimelineSlots; ++i) t[i] = TimelineIsMin(i) ? ~0ull : 0;
  const size_t bytes = t.size() * sizeof(t[0]);
  MG_CUDA(cudaMemcpy(a.buf.timeline, t.data(), bytes, cudaMemcpyHostToDevice));
  MG_RETURN_IF_ERROR(LaunchReadSweep(ctx->flush.get(), ctx->flush.bytes(),
                                     ctx->sink.as<unsigned>(), ctx->sm_count,
                                     ctx->stream));
  if (o.cuda_graph) {
    MG_CUDA(cudaGraphLaunch(graph.exec, ctx->stream));
  } else {
    MG_RETURN_IF_ERROR(ops.launch(a, ws, ctx->stream));
  }
  MG_CUDA(cudaStreamSynchronize(ctx->stream));
  MG_CUDA(cudaMemcpy(t.data(), a.buf.timeline, bytes, cudaMemcpyDeviceToHost));
  auto us = [&](int i) {
    return t[i] == 0 || t[i] == ~0ull ? -1.0 : UsFromStart(t, t[i]);
  };
  std::fprintf(stderr,
               "timeline %s %dx%d graph %d batch %d: router logits %.1f last "
               "%.1f topk %.1f slots %.1f end %.1f | gate_up start %.1f "
               "shared_done %.1f released %.1f end %.1f | down start %.1f "
               "end %.1f | gate_up last start %.1f first shared_done %.1f "
               "last released %.1f\n",
               o.backend.c_str(), o.block_n, o.block_k, o.cuda_graph ? 1 : 0,
               a.geo.batch, us(1), us(2), us(3), us(4), us(5), us(6), us(7),
               us(8), us(9), us(10), us(11), us(12), us(14), us(13));
  PrintWarpSpread(t);
  PrintRouterSpread(t);
  PrintGateUpDiagnostics(t);
  PrintLandingRate(t, a, o);
  PrintUnitCompute(t);
  return OkStatus();
}
#endif

// Samples: the time of the whole chain (one layer, or chain_layers back to
// back) / its layers.
GpuStatus TimeLayers(Context* ctx, const BackendOps& ops,
                     const std::vector<LayerArgs>& chain, void* ws,
                     const MoeRunOptions& o, std::vector<double>* samples) {
  GraphHolder graph;
  if (o.cuda_graph)
    MG_RETURN_IF_ERROR(Capture(ops, chain, ws, ctx->stream, &graph));
  const int total = o.warmup + o.iterations;
  EventPool pool;
  MG_RETURN_IF_ERROR(pool.Create(2 * static_cast<size_t>(total)));
  for (int it = 0; it < total; ++it) {
    // Flush L2 with a read (no dirty lines left to write back in the timed
    // region): each layer starts from DRAM, as after the previous layer.
    MG_RETURN_IF_ERROR(LaunchReadSweep(ctx->flush.get(), ctx->flush.bytes(),
                                       ctx->sink.as<unsigned>(), ctx->sm_count,
                                       ctx->stream));
    MG_CUDA(cudaEventRecord(pool.events[2 * it], ctx->stream));
    if (o.cuda_graph) {
      MG_CUDA(cudaGraphLaunch(graph.exec, ctx->stream));
    } else {
      MG_RETURN_IF_ERROR(LaunchChain(ops, chain, ws, ctx->stream));
    }
    MG_CUDA(cudaEventRecord(pool.events[2 * it + 1], ctx->stream));
  }
  MG_CUDA(cudaStreamSynchronize(ctx->stream));
#ifdef MOETUNE_TIMELINE
  if (chain.size() == 1)  // the stamps are one layer's
    MG_RETURN_IF_ERROR(PrintTimeline(ctx, ops, chain[0], ws, o, graph));
#endif
  for (int it = o.warmup; it < total; ++it) {
    float ms = 0;
    MG_CUDA(cudaEventElapsedTime(&ms, pool.events[2 * it],
                                 pool.events[2 * it + 1]));
    samples->push_back(ms * 1000.0 / static_cast<double>(chain.size()));
  }
  return OkStatus();
}

LayerArgs MakeArgs(const Geometry& geo, const MoeRunOptions& o,
                   const BackendOps& ops, const Context& ctx,
                   const WeightSet& weights) {
  LayerArgs a;
  a.geo = geo;
  a.block_n = o.block_n;
  a.block_k = o.block_k;
  const BackendInfo* info = FindBackend(o.backend);
  if (ops.has_tiles && o.block_n == 0 && o.block_k == 0 &&
      !info->tiles.empty()) {
    a.block_n = info->tiles.front().block_n;  // the backend's default tile
    a.block_k = info->tiles.front().block_k;
  }
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
                     const BackendOps& ops, const LayerArgs& a,
                     const RunState& st, int i, MoeRunResult* r, int* routed) {
  MG_RETURN_IF_ERROR(ops.launch(a, st.workspace.get(), ctx->stream));
  MG_CUDA(cudaStreamSynchronize(ctx->stream));
  const size_t bh = static_cast<size_t>(a.geo.batch) * a.geo.hidden;
  MG_RETURN_IF_ERROR(AppendOut(a.buf.y, bh, &r->output));
  MG_CUDA(cudaMemcpy(routed, a.buf.meta + kMetaRouted, sizeof(*routed),
                     cudaMemcpyDeviceToHost));
  if (!o.compute_reference) return OkStatus();
  MoeProblem layer = p;
  layer.layer = p.layer + i;
  MG_RETURN_IF_ERROR(
      RunTrusted(layer, a.geo, st.x_float, a.buf.bias, st.y_ref, ctx->stream));
  return AppendOut(st.y_ref, bh, &r->reference_output);
}

GpuStatus PrepareRun(const MoeProblem& p, const MoeRunOptions& o, Context** ctx,
                     const BackendOps** ops, Geometry* geo) {
  MG_RETURN_IF_ERROR(ValidateDims(p));
  MG_RETURN_IF_ERROR(ValidateShardAndOptions(p, o));
  MG_RETURN_IF_ERROR(ResolveBackend(o, ops));
  *geo = MakeGeometry(p);
  MG_RETURN_IF_ERROR(CheckLimits(*geo, o, **ops));
  MG_RETURN_IF_ERROR(GetContext(o.device, ctx));
  if (*ops == &DequantCublasOps()) MG_RETURN_IF_ERROR(EnsureCublas(*ctx));
  return OkStatus();
}

// Layer p.layer + i's weights in `ops`' layout: the context's cached set
// (i = 0) or the chain's, generated when the key differs.
GpuStatus EnsureWeights(Context* ctx, const MoeProblem& p,
                        const MoeRunOptions& o, const BackendOps& ops, int i,
                        const WeightSet** out) {
  MoeProblem layer = p;
  layer.layer = p.layer + i;
  WeightSet* set = &ctx->weights;
  if (i > 0) {
    if (ctx->chain.size() < static_cast<size_t>(i)) ctx->chain.resize(i);
    std::unique_ptr<WeightSet>& slot = ctx->chain[i - 1];
    if (slot == nullptr) slot = std::make_unique<WeightSet>();
    set = slot.get();
  }
  const WeightKey key{o.device,   layer.seed,  layer.layer,
                      layer.dims, layer.shard, ops.weight_layout};
  if (!(set->key == key)) {
    MG_RETURN_IF_ERROR(
        GenerateWeights(layer, o.device, ops.weight_layout, set));
  }
  *out = set;
  return OkStatus();
}

// Bytes of one layer's weights on this rank: the router (BF16) and every
// stored expert.
double LayerWeightBytes(const Geometry& g) {
  return 2.0 * g.experts * g.hidden +
         (g.num_local + g.has_shared) * ExpertSliceBytes(g);
}

// Refuses a chain whose layers not yet on the GPU do not fit (sized).
GpuStatus CheckChainFits(const Context& ctx, const MoeRunOptions& o,
                         const Geometry& g) {
  const int have = static_cast<int>(ctx.chain.size());
  const int missing = o.chain_layers - 1 - have;
  if (missing <= 0) return OkStatus();
  size_t free_bytes = 0, total_bytes = 0;
  MG_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::string error =
      ChainDoesNotFit(o.chain_layers, missing, LayerWeightBytes(g),
                      static_cast<double>(free_bytes));
  if (error.empty()) return OkStatus();
  return Fail(RunStatus::kCannotImplement, error);
}

// The layers after the first of a chain: their weights and one checked run
// each (CheckedRun); adds their bytes for the experts each routes.
GpuStatus ExtendChain(Context* ctx, const MoeProblem& p, const MoeRunOptions& o,
                      const BackendOps& ops, const RunState& st,
                      std::vector<LayerArgs>* chain, MoeRunResult* r,
                      double* bytes) {
  const LayerArgs first = chain->front();
  // A shorter chain than before frees the layers it no longer needs.
  if (ctx->chain.size() >= static_cast<size_t>(o.chain_layers))
    ctx->chain.resize(o.chain_layers - 1);
  MG_RETURN_IF_ERROR(CheckChainFits(*ctx, o, first.geo));
  for (int i = 1; i < o.chain_layers; ++i) {
    const WeightSet* w = nullptr;
    MG_RETURN_IF_ERROR(EnsureWeights(ctx, p, o, ops, i, &w));
    LayerArgs a = MakeArgs(first.geo, o, ops, *ctx, *w);
    a.buf = first.buf;
    int routed = 0;
    MG_RETURN_IF_ERROR(CheckedRun(ctx, p, o, ops, a, st, i, r, &routed));
    *bytes += MinBytes(a.geo, routed);
    chain->push_back(a);
  }
  return OkStatus();
}

GpuStatus RunLocked(const MoeProblem& p, const MoeRunOptions& o,
                    MoeRunResult* r) {
  Context* ctx = nullptr;
  const BackendOps* ops = nullptr;
  Geometry geo;
  MG_RETURN_IF_ERROR(PrepareRun(p, o, &ctx, &ops, &geo));
  MG_RETURN_IF_ERROR(ops->can_implement(MakeArgs(geo, o, *ops, *ctx, {})));
  const WeightSet* weights = nullptr;
  MG_RETURN_IF_ERROR(EnsureWeights(ctx, p, o, *ops, 0, &weights));
  LayerArgs args = MakeArgs(geo, o, *ops, *ctx, *weights);
  RunState st;
  MG_RETURN_IF_ERROR(AllocRun(p, &args, *ops, &st));
  MG_RETURN_IF_ERROR(
      CheckedRun(ctx, p, o, *ops, args, st, 0, r, &r->distinct_experts));
  std::vector<LayerArgs> chain{args};
  double bytes = MinBytes(geo, r->distinct_experts);
  MG_RETURN_IF_ERROR(ExtendChain(ctx, p, o, *ops, st, &chain, r, &bytes));
  r->bytes = bytes / static_cast<double>(chain.size());
  return TimeLayers(ctx, *ops, chain, st.workspace.get(), o, &r->samples_us);
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
