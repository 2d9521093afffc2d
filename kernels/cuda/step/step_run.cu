// RunDecodeStep (kernels/cuda/step/step_gpu.h): checks the request, makes sure
// the rank's shard fits and is generated (cached between runs of the same
// problem in this process), runs the step once, untimed, for its logits (and
// the trusted-MoE step's), counts its kernels, times it, and profiles its
// parts when asked.
#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "kernels/cuda/base/device.cuh"
#include "kernels/cuda/moe/run_checks.cuh"
#include "kernels/cuda/moe/run_context.cuh"
#include "kernels/cuda/step/part_timer.cuh"
#include "kernels/cuda/step/step_gpu.h"
#include "kernels/cuda/step/step_launch.cuh"
#include "kernels/cuda/step/step_weights.cuh"

namespace moetune::gpu {
namespace {

GpuStatus Bad(const std::string& message) {
  return Fail(RunStatus::kBadProblem, message);
}

std::unique_ptr<StepWeights>& WeightsSlot() {
  static auto* slot = new std::unique_ptr<StepWeights>;
  return *slot;
}

// The MoE runtime's checks on the first MoE layer, as a layer run of this
// step's batch would see it.
MoeProblem FirstMoeLayer(const StepProblem& p) {
  MoeProblem m = MoeLayerProblem(p, p.dims.num_dense_layers);
  m.input.assign(static_cast<size_t>(MoeTokens(p)) * p.dims.moe.hidden, 0.0f);
  m.router_bias = p.router_bias.empty()
                      ? std::vector<float>(p.dims.moe.num_experts, 0.0f)
                      : p.router_bias.front();
  return m;
}

MoeRunOptions MoeOptions(const StepRunOptions& o) {
  MoeRunOptions m;
  m.backend = o.backend;
  m.tile = o.tile;
  m.cuda_graph = o.cuda_graph;
  m.warmup = o.warmup;
  m.iterations = o.iterations;
  m.device = o.device;
  return m;
}

// What the kernels of the problem's formats need of its dims.
GpuStatus CheckFormats(const StepProblem& p) {
  const StepDims& d = p.dims;
  const int o_columns = MakeStepGeometry(p).heads * d.v_dim;
  if (p.formats.attention_nvfp4 &&
      (d.q_lora % 32 || d.kv_lora % 32 || o_columns % 32)) {
    return Fail(RunStatus::kCannotImplement,
                "problem.formats.attention_nvfp4: the NVFP4 GEMV reads two "
                "16-value blocks at a time: q_lora, kv_lora and the rank's "
                "o_proj columns must be multiples of 32, got " +
                    std::to_string(d.q_lora) + ", " +
                    std::to_string(d.kv_lora) + ", " +
                    std::to_string(o_columns));
  }
  if (p.formats.kv_fp8 && d.kv_lora % 16) {
    return Fail(RunStatus::kCannotImplement,
                "problem.formats.kv_fp8: the FP8 cache is read 16 latent "
                "values at a time: kv_lora must be a multiple of 16, got " +
                    std::to_string(d.kv_lora));
  }
  return OkStatus();
}

GpuStatus ValidateDataParallel(const StepProblem& p) {
  if (!p.dp_attention) return OkStatus();
  if (p.first_sequence != p.shard.rank * p.batch) {
    return Bad("problem.first_sequence: rank * batch under dp_attention");
  }
  const size_t rows = static_cast<size_t>(MoeTokens(p)) * p.dims.hidden;
  if (!p.peer_moe_input.empty() && p.peer_moe_input.size() != rows) {
    return Bad("problem.peer_moe_input: empty or [batch * world][hidden]");
  }
  return OkStatus();
}

GpuStatus ValidateStep(const StepProblem& p) {
  const StepDims& d = p.dims;
  const int world = MakeStepGeometry(p).world;  // the split's ranks
  if (p.layers < 1) return Bad("problem.layers: must be >= 1");
  if (p.context < 0) return Bad("problem.context: must be >= 0");
  if (Prefilled(p) > p.context) {
    return Bad("problem.prefilled: at most context (-1: context)");
  }
  if (world < 1 || d.heads % world != 0 || d.vocab % world != 0 ||
      d.dense_inter % (16 * world) != 0) {
    return Bad(
        "problem.shard: tp * ep must divide the heads, the vocabulary "
        "and the dense MLP (in blocks of 16)");
  }
  MG_RETURN_IF_ERROR(ValidateDataParallel(p));
  if (d.index_heads > 32) return Bad("problem.dims.index_heads: at most 32");
  if (d.hidden % 32 || d.q_lora % 8 || d.kv_lora % 8 || d.v_dim % 8 ||
      d.rope % 8) {
    return Bad(
        "problem.dims: hidden must be a multiple of 32, q_lora, "
        "kv_lora, v_dim and rope of 8");
  }
  if (p.tokens.size() != static_cast<size_t>(p.batch))
    return Bad("problem.tokens: one a sequence");
  MG_RETURN_IF_ERROR(CheckFormats(p));
  const int moe_layers = std::max(0, p.layers - d.num_dense_layers);
  if (p.router_bias.size() != static_cast<size_t>(moe_layers))
    return Bad("problem.router_bias: one a MoE layer run");
  if (p.rope_cos.size() != static_cast<size_t>(d.rope / 2) ||
      p.rope_sin.size() != p.rope_cos.size()) {
    return Bad("problem.rope_cos / rope_sin: rope / 2 values each");
  }
  return OkStatus();
}

std::string Gib(double bytes) {
  char text[32];
  snprintf(text, sizeof(text), "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  return text;
}

// Refuses, with the sizes, a shard that does not fit next to what is free
// (`weights_resident`: its weights are already on the device).
GpuStatus CheckFits(const StepProblem& p, WeightLayout layout,
                    bool weights_resident) {
  size_t free_bytes = 0, total_bytes = 0;
  MG_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  const double weights = static_cast<double>(StepWeightBytes(p, layout));
  const double caches = static_cast<double>(StepCacheBytes(p));
  const double margin = 1.0 * (1 << 30);  // activations, workspace, graphs
  const double needed = (weights_resident ? 0 : weights) + caches + margin;
  if (needed <= static_cast<double>(free_bytes)) return OkStatus();
  return Fail(RunStatus::kCannotImplement,
              "rank " + std::to_string(p.shard.rank) + "'s shard needs " +
                  Gib(weights + caches) + " (weights " + Gib(weights) +
                  ", KV caches and indexer keys " + Gib(caches) + ") and " +
                  Gib(static_cast<double>(free_bytes)) + " is free" +
                  (weights_resident ? " beside its resident weights" : "") +
                  ": run fewer layers, a smaller batch or context");
}

std::unique_ptr<StepCaches>& CachesSlot() {
  static auto* slot = new std::unique_ptr<StepCaches>;
  return *slot;
}

// The shard's weights (kept while the next run's shard is the same) and its
// caches (kept while the batch, the synthetic tokens and the room are too:
// a multi-step decode's steps share them); what changed is freed
// before the fit check and made again.
GpuStatus EnsureShard(const StepProblem& p, Context* ctx, int device,
                      WeightLayout layout, const StepWeights** weights,
                      const StepCaches** caches) {
  std::unique_ptr<StepWeights>& w = WeightsSlot();
  std::unique_ptr<StepCaches>& c = CachesSlot();
  const StepWeightKey key = WeightKeyOf(p, device, layout);
  const bool weights_ok = w != nullptr && w->key == key;
  const bool caches_ok =
      weights_ok && c != nullptr && c->weights == key && c->batch == p.batch &&
      c->first_sequence == p.first_sequence && c->prefilled == Prefilled(p) &&
      c->tokens == CacheTokens(p) && c->kv_fp8 == p.formats.kv_fp8;
  if (!caches_ok) c.reset();
  if (!weights_ok) {
    w.reset();
    ctx->weights = WeightSet();  // the MoE runtime's cached layers too
    ctx->chain.clear();
  }
  if (!caches_ok) MG_RETURN_IF_ERROR(CheckFits(p, layout, weights_ok));
  if (!weights_ok) {
    auto fresh = std::make_unique<StepWeights>();
    MG_RETURN_IF_ERROR(GenerateStepWeights(p, device, layout, fresh.get()));
    w = std::move(fresh);
  }
  if (!caches_ok) {
    auto fresh = std::make_unique<StepCaches>();
    MG_RETURN_IF_ERROR(GenerateStepCaches(p, fresh.get()));
    fresh->weights = key;
    c = std::move(fresh);
  }
  *weights = w.get();
  *caches = c.get();
  return OkStatus();
}

template <typename T>
GpuStatus Download(const T* src, size_t n, std::vector<T>* out) {
  out->resize(n);
  if (n > 0) {
    MG_CUDA(
        cudaMemcpy(out->data(), src, n * sizeof(T), cudaMemcpyDeviceToHost));
  }
  return OkStatus();
}

// A collective that failed on the device (NCCL's asynchronous error, a
// one-shot peer that never came) is the step's error.
GpuStatus CheckGang(const StepLaunch& s) {
  if (s.comm == nullptr) return OkStatus();
  std::string why;
  if (s.comm->Check(&why) != RunStatus::kOk) {
    return Fail(RunStatus::kCudaError, why);
  }
  return OkStatus();
}

// What the checked run chose (StepRunResult's kept sets, routes and
// distinct experts), downloaded.
GpuStatus DownloadChoices(const StepLaunch& s, StepRunResult* r) {
  const StepProblem& p = *s.problem;
  const size_t rows = size_t(p.layers) * p.batch;
  MG_RETURN_IF_ERROR(Download(s.buffers->kept_sets, rows * p.dims.index_topk,
                              &r->kept_tokens));
  MG_RETURN_IF_ERROR(Download(s.buffers->kept_counts, rows, &r->kept_counts));
  MG_RETURN_IF_ERROR(Download(s.buffers->routes,
                              s.moe_args.size() * MoeChoices(p),
                              &r->chosen_experts));
  return Download(s.buffers->routed, s.moe_args.size(), &r->distinct_experts);
}

// One untimed step: its logits, next tokens and choices, and with
// compute_reference every MoE layer checked on its own input.
GpuStatus CheckedRuns(StepLaunch s, Context* ctx, const StepRunOptions& o,
                      StepRunResult* r) {
  const StepProblem& p = *s.problem;
  const size_t logits = static_cast<size_t>(p.batch) * s.geo.vocab;
  s.record_choices = true;
  if (o.compute_reference) {
    s.moe_output = &r->moe_output;
    s.moe_reference = &r->moe_reference;
  }
  MG_RETURN_IF_ERROR(EnqueueStep(s, ctx->stream));
  MG_CUDA(cudaStreamSynchronize(ctx->stream));
  MG_RETURN_IF_ERROR(CheckGang(s));
  MG_RETURN_IF_ERROR(Download(s.buffers->logits, logits, &r->logits));
  MG_RETURN_IF_ERROR(Download(s.buffers->next, p.batch, &r->next_tokens));
  return DownloadChoices(s, r);
}

struct Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
};

GpuStatus Capture(const StepLaunch& s, cudaStream_t stream, Graph* g,
                  bool instantiate) {
  MG_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const GpuStatus launched = EnqueueStep(s, stream);
  const cudaError_t ended = cudaStreamEndCapture(stream, &g->graph);
  MG_RETURN_IF_ERROR(launched);
  MG_CUDA(ended);
  if (instantiate) MG_CUDA(cudaGraphInstantiate(&g->exec, g->graph, 0));
  return OkStatus();
}

// The step's kernels: the nodes of its captured graph.
GpuStatus CountKernels(const StepLaunch& s, Context* ctx, int* kernels) {
  Graph g;
  MG_RETURN_IF_ERROR(Capture(s, ctx->stream, &g, false));
  size_t nodes = 0;
  MG_CUDA(cudaGraphGetNodes(g.graph, nullptr, &nodes));
  *kernels = static_cast<int>(nodes);
  return OkStatus();
}

struct Events {
  std::vector<cudaEvent_t> events;
  ~Events() {
    for (cudaEvent_t e : events) cudaEventDestroy(e);
  }
};

GpuStatus TimeSteps(const StepLaunch& s, Context* ctx, const StepRunOptions& o,
                    std::vector<double>* samples) {
  Graph graph;
  if (o.cuda_graph) MG_RETURN_IF_ERROR(Capture(s, ctx->stream, &graph, true));
  const int total = o.warmup + o.iterations;
  Events ev;
  ev.events.resize(2 * static_cast<size_t>(total));
  for (cudaEvent_t& e : ev.events) MG_CUDA(cudaEventCreate(&e));
  for (int it = 0; it < total; ++it) {
    // Every step starts from DRAM: L2 flushed with a read sweep.
    MG_RETURN_IF_ERROR(LaunchReadSweep(ctx->flush.get(), ctx->flush.bytes(),
                                       ctx->sink.as<unsigned>(), ctx->sm_count,
                                       ctx->stream));
    MG_CUDA(cudaEventRecord(ev.events[2 * it], ctx->stream));
    if (o.cuda_graph) {
      MG_CUDA(cudaGraphLaunch(graph.exec, ctx->stream));
    } else {
      MG_RETURN_IF_ERROR(EnqueueStep(s, ctx->stream));
    }
    MG_CUDA(cudaEventRecord(ev.events[2 * it + 1], ctx->stream));
  }
  MG_CUDA(cudaStreamSynchronize(ctx->stream));
  for (int it = o.warmup; it < total; ++it) {
    float ms = 0;
    MG_CUDA(
        cudaEventElapsedTime(&ms, ev.events[2 * it], ev.events[2 * it + 1]));
    samples->push_back(ms * 1000.0);
  }
  return OkStatus();
}

// The step's collectives alone, as the step runs them (a graph when the
// step is one), after the same warm-up: the communication's share.
GpuStatus TimeCollectives(const StepLaunch& s, Context* ctx,
                          const StepRunOptions& o, StepRunResult* r) {
  if (s.comm == nullptr) return OkStatus();
  Graph graph;
  if (o.cuda_graph) {
    MG_CUDA(
        cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal));
    const GpuStatus launched =
        EnqueueCollectives(s, ctx->stream, &r->collectives_per_step);
    const cudaError_t ended = cudaStreamEndCapture(ctx->stream, &graph.graph);
    MG_RETURN_IF_ERROR(launched);
    MG_CUDA(ended);
    MG_CUDA(cudaGraphInstantiate(&graph.exec, graph.graph, 0));
  }
  std::vector<double> samples;
  Events ev;
  ev.events.resize(2);
  for (cudaEvent_t& e : ev.events) MG_CUDA(cudaEventCreate(&e));
  for (int it = 0; it < o.warmup + o.iterations; ++it) {
    MG_CUDA(cudaEventRecord(ev.events[0], ctx->stream));
    if (o.cuda_graph) {
      MG_CUDA(cudaGraphLaunch(graph.exec, ctx->stream));
    } else {
      MG_RETURN_IF_ERROR(
          EnqueueCollectives(s, ctx->stream, &r->collectives_per_step));
    }
    MG_CUDA(cudaEventRecord(ev.events[1], ctx->stream));
    MG_CUDA(cudaEventSynchronize(ev.events[1]));
    float ms = 0;
    MG_CUDA(cudaEventElapsedTime(&ms, ev.events[0], ev.events[1]));
    if (it >= o.warmup) samples.push_back(1000.0 * ms);
  }
  std::sort(samples.begin(), samples.end());
  r->comm_us = samples[samples.size() / 2];
  return CheckGang(s);
}

// One eager step of the production schedule with a PartTimer watching it.
GpuStatus ProfileParts(StepLaunch s, Context* ctx, StepRunResult* r) {
  PartTimer timer;
  s.observer = &timer;
  MG_RETURN_IF_ERROR(EnqueueStep(s, ctx->stream));
  MG_CUDA(cudaStreamSynchronize(ctx->stream));
  return timer.Totals(&r->part_us);
}

GpuStatus Prepare(const StepProblem& p, const StepRunOptions& o, Context** ctx,
                  const Launcher** launcher) {
  MG_RETURN_IF_ERROR(ValidateStep(p));
  if (o.comm != nullptr &&
      (o.comm->world() != World(p) || o.comm->rank() != p.shard.rank)) {
    return Bad("options.comm: rank " + std::to_string(o.comm->rank()) +
               " of a gang of " + std::to_string(o.comm->world()) +
               " cannot run rank " + std::to_string(p.shard.rank) + " of " +
               std::to_string(World(p)));
  }
  if (o.append_to_caches && p.context >= CacheTokens(p)) {
    return Bad(
        "problem.cache_tokens: must exceed context for the step to append "
        "its tokens");
  }
  const MoeProblem first = FirstMoeLayer(p);
  const MoeRunOptions mo = MoeOptions(o);
  MG_RETURN_IF_ERROR(ValidateProblem(first, mo));
  MG_RETURN_IF_ERROR(ResolveLauncher(mo, launcher));
  MG_RETURN_IF_ERROR(
      CheckCanImplement(MakeGeometry(first), mo, *(*launcher)->descriptor));
  MG_RETURN_IF_ERROR(GetContext(o.device, ctx));
  if ((*launcher)->descriptor->gpu.cublas)
    MG_RETURN_IF_ERROR(EnsureCublas(*ctx));
  return OkStatus();
}

// How the step's kernels are launched: overlapped as the options say, each
// asking for only the shared memory its grid needs (carveout.h) but the side
// stream's and the MoE layers' router, which take the driver's
// (step_launch.cu LaunchBeside and PrepareMoeArgs say why). Every launch
// fitted measured 2.3 % faster at batch 1 but 2.5 % slower at 8; with those
// two at the driver's, 0.2 to 0.8 % faster at 1-16 sequences and within
// 0.1 % at 32.
LaunchPolicy StepPolicy(const StepRunOptions& o) {
  LaunchPolicy policy;
  policy.overlap = o.overlap_launches;
  policy.weights_ahead = o.weights_ahead;
  policy.fit_carveout = true;
  return policy;
}

GpuStatus RunLocked(const StepProblem& p, const StepRunOptions& o,
                    StepRunResult* r) {
  Context* ctx = nullptr;
  const Launcher* launcher = nullptr;
  MG_RETURN_IF_ERROR(Prepare(p, o, &ctx, &launcher));
  const StepWeights* weights = nullptr;
  const StepCaches* caches = nullptr;
  MG_RETURN_IF_ERROR(EnsureShard(p, ctx, o.device, launcher->weight_layout,
                                 &weights, &caches));
  StepBuffers buffers;
  MG_RETURN_IF_ERROR(AllocStepBuffers(p, *launcher, &buffers));
  StepLaunch s;
  s.problem = &p;
  s.geo = MakeStepGeometry(p);
  s.weights = weights;
  s.caches = caches;
  s.launcher = launcher;
  s.buffers = &buffers;
  s.device = o.device;
  s.sm_count = ctx->sm_count;
  s.append = o.append_to_caches;
  s.cublas = ctx->cublas;
  s.comm = o.comm;
  s.world = World(p);
  s.policy = StepPolicy(o);
  SideStream side;
  MG_RETURN_IF_ERROR(side.Init());
  s.side = &side;
  const backends::Tile tile =
      RunTile(MoeOptions(o), *launcher->descriptor,
              MakeGeometry(MoeLayerProblem(p, p.dims.num_dense_layers)));
  PrepareMoeArgs(&s, tile);
  r->tile = tile;
  r->weight_bytes = weights->bytes;
  r->cache_bytes = caches->bytes;
  {
    const AddElapsedSeconds checking(*RealClock::Get(), &r->check_s);
    MG_RETURN_IF_ERROR(CheckedRuns(s, ctx, o, r));
  }
  if (launcher->descriptor->graph_capturable) {
    MG_RETURN_IF_ERROR(CountKernels(s, ctx, &r->kernels_per_step));
  }
  {
    const AddElapsedSeconds timing(*RealClock::Get(), &r->timed_s);
    MG_RETURN_IF_ERROR(TimeSteps(s, ctx, o, &r->samples_us));
    MG_RETURN_IF_ERROR(CheckGang(s));
    MG_RETURN_IF_ERROR(TimeCollectives(s, ctx, o, r));
  }
  MG_RETURN_IF_ERROR(Download(buffers.logits,
                              static_cast<size_t>(p.batch) * s.geo.vocab,
                              &r->timed_logits));
  if (o.profile_parts) MG_RETURN_IF_ERROR(ProfileParts(s, ctx, r));
  return OkStatus();
}

}  // namespace

StepRunResult RunDecodeStep(const StepProblem& problem,
                            const StepRunOptions& options) {
  std::lock_guard<std::mutex> lock(DeviceMutex());
  StepRunResult result;
  const GpuStatus status = RunLocked(problem, options, &result);
  if (!status.ok()) {
    result.status = status.code;
    result.message = status.message;
    result.samples_us.clear();
  }
  return result;
}

}  // namespace moetune::gpu
