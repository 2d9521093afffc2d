#include <string>
#include <utility>

#include "kernels/cuda/base/cublas_api.h"
#include "kernels/cuda/moe/chain_budget.h"
#include "kernels/cuda/moe/run_buffers.cuh"
#include "kernels/cuda/moe/run_context.cuh"

namespace moetune::gpu {
namespace {

constexpr size_t kFlushBytes = size_t{192} << 20;  // > 3x the 60 MB L2

std::unique_ptr<Context>& ContextSlot() {
  static auto* slot = new std::unique_ptr<Context>;
  return *slot;
}

}  // namespace

Context::~Context() {
  // A handle exists only where Cublas() loaded the library.
  if (cublas != nullptr) Cublas(nullptr)->destroy(cublas);
  if (stream != nullptr) cudaStreamDestroy(stream);
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
  std::string error;
  const CublasApi* api = Cublas(&error);
  if (api == nullptr) return Fail(RunStatus::kCannotImplement, error);
  const cublasStatus_t s = api->create(&ctx->cublas);
  if (s != CUBLAS_STATUS_SUCCESS) {
    ctx->cublas = nullptr;
    return Fail(RunStatus::kCudaError,
                std::string("cublasCreate: ") + api->status_name(s));
  }
  return OkStatus();
}

GpuStatus EnsureWeights(Context* ctx, const MoeProblem& p, int device,
                        const Launcher& launcher, int i,
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
  const WeightKey key{device,     layer.seed,  layer.layer,
                      layer.dims, layer.shard, launcher.weight_layout};
  if (!(set->key == key)) {
    MG_RETURN_IF_ERROR(
        GenerateWeights(layer, device, launcher.weight_layout, set));
  }
  *out = set;
  return OkStatus();
}

GpuStatus FitChain(Context* ctx, int chain_layers, const Geometry& g) {
  // A shorter chain than before frees the layers it no longer needs.
  if (ctx->chain.size() >= static_cast<size_t>(chain_layers))
    ctx->chain.resize(chain_layers - 1);
  const int have = static_cast<int>(ctx->chain.size());
  const int missing = chain_layers - 1 - have;
  if (missing <= 0) return OkStatus();
  size_t free_bytes = 0, total_bytes = 0;
  MG_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::string error =
      ChainDoesNotFit(chain_layers, missing, LayerWeightBytes(g),
                      static_cast<double>(free_bytes));
  if (error.empty()) return OkStatus();
  return Fail(RunStatus::kCannotImplement, error);
}

}  // namespace moetune::gpu
