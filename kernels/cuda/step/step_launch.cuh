// One decode step enqueued on a stream: the launch sequence of rank r's
// step over its weights (step_weights.cuh) and one set of activation
// buffers, so that it can run eagerly, be captured in a CUDA graph, or be
// timed part by part. Not thread-safe (one step at a time per buffer set).
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <string_view>
#include <vector>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/base/launch_policy.h"
#include "kernels/cuda/comm/comm_gpu.h"
#include "kernels/cuda/moe/launcher.cuh"
#include "kernels/cuda/step/side_stream.cuh"
#include "kernels/cuda/step/step_ops.cuh"
#include "kernels/cuda/step/step_weights.cuh"

namespace moetune::gpu {

// The step's activations and inputs on the device, carved from one
// allocation (float unless noted).
struct StepBuffers {
  DeviceBuffer main, workspace;
  int* tokens = nullptr;  // [batch]
  double *rope_cos = nullptr, *rope_sin = nullptr;
  float* router_bias = nullptr;       // [MoE layers][experts]
  float *h = nullptr, *xn = nullptr;  // [batch][hidden]
  float* qa = nullptr;                // [batch][q_lora]
  float* q = nullptr;                 // [batch][heads][head_dim]
  float* kv = nullptr;                // [batch][latent_dim]
  float *qi = nullptr, *iw = nullptr, *ik = nullptr;  // the indexer's q, w, k
  float* scores = nullptr;                            // [batch][context + 1]
  int *kept = nullptr, *kept_n = nullptr;  // [batch][index_topk], [batch]
  // Each layer's kept and kept_n, as a checked run recorded them:
  // [layers][batch][index_topk], [layers][batch].
  int *kept_sets = nullptr, *kept_counts = nullptr;
  float *q_lat = nullptr, *o_lat = nullptr;  // [batch][heads][kv_lora]
  float* attn_partial = nullptr;             // SparseAttention::partial
  uint2* attn_query_frags = nullptr;         // SparseAttention::query_frags
  float* attn_fresh_dots = nullptr;          // [batch][heads]
  // Nvfp4Gemv::x_parts, for the NVFP4 GEMVs in turn.
  uint2* gemv_x_parts = nullptr;
  float* values = nullptr;                   // [batch][heads * v_dim]
  float* block_out = nullptr;                // [batch][hidden]
  float *gu = nullptr, *act = nullptr;       // dense MLP [batch][2 * slice]
  float *moe_x = nullptr, *moe_y = nullptr;  // the trusted MoE's in / out
  float* logits = nullptr;                   // [batch][vocab slice]
  int* next = nullptr;                       // [batch]
  float* best = nullptr;  // [world][batch][2] the ranks' (logit, token)
  int* routed = nullptr;  // [MoE layers] distinct experts
  int* routes = nullptr;  // [MoE layers][MoeTokens][top_k] chosen experts
  RunBuffers moe;         // the MoE layers' (shared)
};

// Allocates `b` for `p` (the MoE layers' buffers as `launcher` needs them)
// and uploads the inputs: tokens, RoPE table, router biases.
GpuStatus AllocStepBuffers(const StepProblem& p, const Launcher& launcher,
                           StepBuffers* b);

// Watches the schedule EnqueueStep builds: told where each part of the step
// begins, on the stream the part runs on (the step's or the side stream).
// A part ends where the next part on its stream begins; "end" and
// "side/joined" only end the parts before them. The observer may enqueue
// work of its own there (an event), but no kernel of the step waits for it
// and no launch decision of the step consults it, so an observed step runs
// the same kernels, streams and launch policies as an unobserved one.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual GpuStatus PartBegins(const char* part, cudaStream_t stream) = 0;
};
inline constexpr char kStepEnd[] = "end";
inline constexpr char kSideJoined[] = "side/joined";
// Whether `part` only ends the parts before it on its stream.
inline bool EndsOnly(std::string_view part) {
  return part == kStepEnd || part == kSideJoined;
}

struct StepLaunch {
  const StepProblem* problem = nullptr;
  StepGeometry geo;
  const StepWeights* weights = nullptr;
  const StepCaches* caches = nullptr;
  const Launcher* launcher = nullptr;  // the MoE backend
  std::vector<LayerArgs> moe_args;     // one a MoE layer, over b->moe
  StepBuffers* buffers = nullptr;
  int device = 0, sm_count = 0;
  void* cublas = nullptr;
  bool record_choices = false;  // copy each layer's kept set, each MoE
                                // layer's routes and distinct experts
  // Write each layer's new entries into the caches at position context
  // (StepRunOptions::append_to_caches).
  bool append = false;
  // Eager checking pass: after each MoE layer, also run the trusted path on
  // the same input and append both outputs ([batch][hidden] each) here; the
  // step goes on with the backend's.
  std::vector<float>* moe_output = nullptr;
  std::vector<float>* moe_reference = nullptr;
  StepObserver* observer = nullptr;  // told where each part begins
  GangComm* comm = nullptr;          // StepRunOptions::comm
  // Where W_UK's absorption runs beside the indexer (null: in line, on the
  // step's stream).
  SideStream* side = nullptr;
  // How the step's own kernels are launched on its stream (the side stream's
  // and the MoE layers' are derived from it).
  LaunchPolicy policy;
  int world = 1;  // the gang's ranks (1 without one)
};

// Fills moe_args for each MoE layer (weights, router bias, buffers).
void PrepareMoeArgs(StepLaunch* s, const backends::Tile& tile);

// Enqueues the whole step on `stream`.
GpuStatus EnqueueStep(const StepLaunch& s, cudaStream_t stream);
// Enqueues only the step's collectives (the same sums on the same buffers),
// to time the communication apart; counts them in *count.
GpuStatus EnqueueCollectives(const StepLaunch& s, cudaStream_t stream,
                             int* count);

}  // namespace moetune::gpu
