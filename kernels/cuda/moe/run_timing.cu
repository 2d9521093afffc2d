#include "kernels/cuda/base/device.cuh"
#include "kernels/cuda/moe/run_timing.cuh"

namespace moetune::gpu {
namespace {

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
GpuStatus LaunchChain(const Launcher& launcher,
                      const std::vector<LayerArgs>& chain, void* ws,
                      cudaStream_t stream) {
  for (const LayerArgs& a : chain)
    MG_RETURN_IF_ERROR(launcher.launch(a, ws, stream));
  return OkStatus();
}

GpuStatus Capture(const Launcher& launcher, const std::vector<LayerArgs>& chain,
                  void* ws, cudaStream_t stream, GraphHolder* g) {
  MG_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const GpuStatus launched = LaunchChain(launcher, chain, ws, stream);
  const cudaError_t ended = cudaStreamEndCapture(stream, &g->graph);
  MG_RETURN_IF_ERROR(launched);
  MG_CUDA(ended);
  MG_CUDA(cudaGraphInstantiate(&g->exec, g->graph, 0));
  return OkStatus();
}

}  // namespace

GpuStatus TimeLayers(Context* ctx, const Launcher& launcher,
                     const std::vector<LayerArgs>& chain, void* ws,
                     const MoeRunOptions& o, std::vector<double>* samples) {
  GraphHolder graph;
  if (o.cuda_graph)
    MG_RETURN_IF_ERROR(Capture(launcher, chain, ws, ctx->stream, &graph));
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
      MG_RETURN_IF_ERROR(LaunchChain(launcher, chain, ws, ctx->stream));
    }
    MG_CUDA(cudaEventRecord(pool.events[2 * it + 1], ctx->stream));
  }
  MG_CUDA(cudaStreamSynchronize(ctx->stream));
  for (int it = o.warmup; it < total; ++it) {
    float ms = 0;
    MG_CUDA(cudaEventElapsedTime(&ms, pool.events[2 * it],
                                 pool.events[2 * it + 1]));
    samples->push_back(ms * 1000.0 / static_cast<double>(chain.size()));
  }
  return OkStatus();
}

}  // namespace moetune::gpu
