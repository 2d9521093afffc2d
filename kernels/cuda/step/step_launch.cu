#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "kernels/cuda/base/launch.cuh"
#include "kernels/cuda/moe/run_buffers.cuh"
#include "kernels/cuda/moe/trusted.cuh"
#include "kernels/cuda/step/gemv.cuh"
#include "kernels/cuda/step/gemv_nvfp4_mma.cuh"
#include "kernels/cuda/step/mla.cuh"
#include "kernels/cuda/step/mla_mma.cuh"
#include "kernels/cuda/step/step_launch.cuh"

namespace moetune::gpu {
namespace {

int MoeLayers(const StepProblem& p) {
  return std::max(0, p.layers - p.dims.num_dense_layers);
}

void CarveStep(const StepProblem& p, const Launcher& launcher, Carver& c,
               StepBuffers* b) {
  const StepDims& d = p.dims;
  const StepGeometry g = MakeStepGeometry(p);
  const size_t batch = p.batch;
  b->tokens = c.Take<int>(batch);
  b->rope_cos = c.Take<double>(d.rope / 2);
  b->rope_sin = c.Take<double>(d.rope / 2);
  b->router_bias = c.Take<float>(size_t(MoeLayers(p)) * d.moe.num_experts);
  b->h = c.Take<float>(batch * d.hidden);
  b->xn = c.Take<float>(batch * d.hidden);
  b->qa = c.Take<float>(batch * d.q_lora);
  b->q = c.Take<float>(batch * g.heads * g.head_dim);
  b->kv = c.Take<float>(batch * g.latent_dim);
  b->qi = c.Take<float>(batch * d.index_heads * d.index_dim);
  b->iw = c.Take<float>(batch * d.index_heads);
  b->ik = c.Take<float>(batch * d.index_dim);
  b->scores = c.Take<float>(batch * (p.context + 1));
  b->kept = c.Take<int>(batch * d.index_topk);
  b->kept_n = c.Take<int>(batch);
  b->kept_sets = c.Take<int>(size_t(p.layers) * batch * d.index_topk);
  b->kept_counts = c.Take<int>(size_t(p.layers) * batch);
  b->q_lat = c.Take<float>(batch * g.heads * d.kv_lora);
  b->o_lat = c.Take<float>(batch * g.heads * d.kv_lora);
  b->attn_partial = c.Take<float>(
      batch * g.heads * SparseAttentionSplits(d.index_topk) * (d.kv_lora + 2));
  b->attn_query_frags =
      c.Take<uint2>(SparseAttentionQueryFrags(p.batch, g.heads, g.latent_dim));
  b->attn_fresh_dots = c.Take<float>(batch * g.heads);
  b->gemv_x_parts = c.Take<uint2>(Nvfp4GemvInputParts(
      p.batch, std::max({int64_t{d.hidden}, int64_t{d.q_lora},
                         int64_t{g.heads} * d.kv_lora,
                         int64_t{g.heads} * d.v_dim, int64_t{g.dense}})));
  b->values = c.Take<float>(batch * g.heads * d.v_dim);
  b->block_out = c.Take<float>(batch * d.hidden);
  b->gu = c.Take<float>(batch * 2 * g.dense);
  b->act = c.Take<float>(batch * g.dense);
  const size_t moe_tokens = MoeTokens(p);
  b->moe_x = c.Take<float>(moe_tokens * d.hidden);
  b->moe_y = c.Take<float>(moe_tokens * d.hidden);
  b->logits = c.Take<float>(batch * g.vocab);
  b->next = c.Take<int>(batch);
  b->best = c.Take<float>(batch * 2 * World(p));
  b->routed = c.Take<int>(std::max(1, MoeLayers(p)));
  b->routes = c.Take<int>(std::max<size_t>(1, MoeLayers(p) * MoeChoices(p)));
  uint16_t* x_bf16 = c.Take<uint16_t>(moe_tokens * d.hidden);
  CarveLayerBuffers(MakeGeometry(MoeLayerProblem(p, d.num_dense_layers)),
                    launcher, c, &b->moe);
  b->moe.x_bf16 = x_bf16;
}

GpuStatus Upload(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) MG_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  return OkStatus();
}

// The other ranks' MoE inputs without a gang (StepProblem::peer_moe_input)
// into the MoE input rows, as the layer reads them (BF16 values already).
GpuStatus UploadPeerInputs(const StepProblem& p, const StepBuffers& b) {
  const std::vector<float>& x = p.peer_moe_input;
  if (x.empty()) return OkStatus();
  return UploadBf16Input(x.data(), x.size(),
                         const_cast<uint16_t*>(b.moe.x_bf16), b.moe_x);
}

// Weight rows of a GEMV over the batch: plain (one input for all rows).
Bf16Gemv Plain(const uint16_t* w, int rows, int k, const float* x,
               int64_t x_stride, float* y, int64_t y_stride, int batch) {
  Bf16Gemv g;
  g.w = w;
  g.rows = rows;
  g.k = k;
  g.x = x;
  g.x_stride = x_stride;
  g.y = y;
  g.y_stride = y_stride;
  g.batch = batch;
  return g;
}

// The same plain product with NVFP4 weights.
Nvfp4Gemv PlainNvfp4(const DeviceMatrix& w, int rows, int k, const float* x,
                     int64_t x_stride, float* y, int64_t y_stride, int batch) {
  Nvfp4Gemv g;
  g.codes = w.codes;
  g.scales = w.scales;
  g.tensor_scale = w.tensor_scale;
  g.rows = rows;
  g.k = k;
  g.x = x;
  g.x_stride = x_stride;
  g.y = y;
  g.y_stride = y_stride;
  g.batch = batch;
  return g;
}

// y [batch][rows] = W x, with W in its format's kernel (NVFP4 with the
// step's scratch for its inputs' parts).
GpuStatus LaunchGemv(const DeviceMatrix& w, int rows, int k, const float* x,
                     int64_t x_stride, float* y, int64_t y_stride, int batch,
                     uint2* x_parts, cudaStream_t stream,
                     const LaunchPolicy& policy) {
  if (w.nvfp4()) {
    Nvfp4Gemv g = PlainNvfp4(w, rows, k, x, x_stride, y, y_stride, batch);
    g.x_parts = x_parts;
    return LaunchGemvNvfp4(g, stream, policy);
  }
  return LaunchGemvBf16(Plain(w.bf16, rows, k, x, x_stride, y, y_stride, batch),
                        stream, policy);
}

RopeTable Rope(const StepLaunch& s) {
  return RopeTable{s.buffers->rope_cos, s.buffers->rope_sin,
                   s.problem->dims.rope / 2};
}

// Tells the step's observer, if any, that `part` begins on `stream`.
GpuStatus Observe(const StepLaunch& s, const char* part, cudaStream_t stream) {
  return s.observer == nullptr ? OkStatus()
                               : s.observer->PartBegins(part, stream);
}

// Enqueues `launch` as part `name` ("part/kernel") of the step, the
// observer told first (StepObserver).
#define STEP_PART(name, launch)                   \
  do {                                            \
    MG_RETURN_IF_ERROR(Observe(s, name, stream)); \
    MG_RETURN_IF_ERROR(launch);                   \
  } while (0)

// Sums the block's output [batch][hidden] over the gang (no gang: the
// rank's partial sum stays, standing in for the modelled collective). Under
// data-parallel attention the blocks are whole: nothing to sum.
GpuStatus SumOverGang(const StepLaunch& s, float* data, cudaStream_t stream) {
  if (s.comm == nullptr || s.problem->dp_attention) return OkStatus();
  MG_RETURN_IF_ERROR(Observe(s, "comm/all_reduce", stream));
  std::string why;
  const int64_t n = int64_t{s.problem->batch} * s.problem->dims.hidden;
  if (s.comm->AllReduceSum(data, n, stream, &why) != RunStatus::kOk) {
    return Fail(RunStatus::kCudaError, why);
  }
  return OkStatus();
}

struct Projection {
  const DeviceMatrix& w;  // [rows][k]
  int rows;
  float* y;  // [batch][rows]
};

// One GEMV over several BF16 matrices of one input x [batch][k] where their
// weights lie back to back (step_weights.cu carves them so): one ramp up
// and down instead of several. Else (NVFP4 weights among them) a GEMV a
// matrix, each in its format's kernel.
GpuStatus Project(const char* part, const StepLaunch& s,
                  std::initializer_list<Projection> list, int k, const float* x,
                  cudaStream_t stream) {
  const int n = s.problem->batch;
  bool contiguous = list.size() <= Bf16Gemv::kMaxSegments;
  const uint16_t* next = list.begin()->w.bf16;
  for (const Projection& p : list) {
    contiguous = contiguous && !p.w.nvfp4() && p.w.bf16 == next;
    if (!p.w.nvfp4()) next = p.w.bf16 + int64_t{p.rows} * k;
  }
  if (contiguous) {
    Bf16Gemv g = Plain(list.begin()->w.bf16, 0, k, x, k, nullptr, 0, n);
    for (const Projection& p : list) AddGemvSegment(&g, p.rows, p.y, p.rows);
    STEP_PART(part, LaunchGemvBf16(g, stream, s.policy));
    return OkStatus();
  }
  for (const Projection& p : list) {
    STEP_PART(part, LaunchGemv(p.w, p.rows, k, x, k, p.y, p.rows, n,
                               s.buffers->gemv_x_parts, stream, s.policy));
  }
  return OkStatus();
}

// After the input projections, in one launch: q_a's norm, the latent
// entry's norm with its rope key rotated, the indexer key's LayerNorm and
// RoPE.
RowNorms LatentNorms(const StepLaunch& s, const LayerParams& w) {
  const StepDims& d = s.problem->dims;
  StepBuffers& b = *s.buffers;
  RowNorms norms;
  norms.jobs = 3;
  RowNorm& q = norms.job[0];
  q.x = b.qa;
  q.x_stride = d.q_lora;
  q.gamma = w.q_a_norm;
  q.n = d.q_lora;
  q.eps = d.latent_eps;
  q.out = {b.qa, d.q_lora};
  RowNorm& latent = norms.job[1];
  latent.x = b.kv;
  latent.x_stride = s.geo.latent_dim;
  latent.gamma = w.kv_a_norm;
  latent.n = d.kv_lora;
  latent.eps = d.latent_eps;
  latent.out = {b.kv, s.geo.latent_dim};
  latent.out.rope_offset = d.kv_lora;  // the rope key
  latent.out.rope = Rope(s);
  RowNorm& key = norms.job[2];
  key.layer_norm = true;
  key.x = b.ik;
  key.gamma = w.key_norm;
  key.beta = w.key_bias;
  key.n = d.index_dim;
  key.eps = d.index_eps;
  key.out.rope = Rope(s);
  return norms;
}

// q (rotated), the new token's latent entry (normed, rotated), and the
// indexer's query (rotated), head weights and key (normed, rotated).
GpuStatus QueryAndLatent(const StepLaunch& s, const LayerParams& w,
                         cudaStream_t stream) {
  const StepDims& d = s.problem->dims;
  const StepGeometry& g = s.geo;
  StepBuffers& b = *s.buffers;
  const int n = s.problem->batch, q_rows = g.heads * g.head_dim;
  MG_RETURN_IF_ERROR(Project("attention/x_projections", s,
                             {{w.q_a, d.q_lora, b.qa},
                              {w.kv_a, g.latent_dim, b.kv},
                              {w.index_k, d.index_dim, b.ik},
                              {w.index_w, d.index_heads, b.iw}},
                             d.hidden, b.xn, stream));
  STEP_PART("attention/latent_norms",
            LaunchRowNorms(LatentNorms(s, w), n, stream, s.policy));
  MG_RETURN_IF_ERROR(Project(
      "attention/q_projections", s,
      {{w.q_b, q_rows, b.q}, {w.index_q, d.index_heads * d.index_dim, b.qi}},
      d.q_lora, b.qa, stream));
  return OkStatus();
}

// The attention's and the indexer's queries rotated, in one launch.
GpuStatus RotateQueries(const StepLaunch& s, cudaStream_t stream) {
  const StepDims& d = s.problem->dims;
  const StepGeometry& g = s.geo;
  StepBuffers& b = *s.buffers;
  const int n = s.problem->batch;
  STEP_PART("attention/q_rope",
            LaunchRopeRows({b.q, n * g.heads, g.head_dim, d.nope},
                           {b.qi, n * d.index_heads, d.index_dim, 0}, Rope(s),
                           stream, s.policy));
  return OkStatus();
}

IndexerScores ScoresOf(const StepLaunch& s, int layer) {
  const StepDims& d = s.problem->dims;
  StepBuffers& b = *s.buffers;
  IndexerScores scores;
  scores.q = b.qi;
  scores.w = b.iw;
  scores.new_key = b.ik;
  scores.keys = s.caches->keys(layer);
  scores.key_stride = s.caches->tokens;
  scores.heads = d.index_heads;
  scores.dim = d.index_dim;
  scores.context = s.problem->context;
  scores.batch = s.problem->batch;
  scores.w_scale = static_cast<float>(1.0 / std::sqrt(double(d.index_heads)));
  scores.dot_scale = static_cast<float>(1.0 / std::sqrt(double(d.index_dim)));
  scores.scores = b.scores;
  scores.sm_count = s.sm_count;
  return scores;
}

// The DSA indexer (its query, head weights and key projected, its key normed
// and both rotated, beside the attention's): the scores of every token, the
// kept set.
GpuStatus Indexer(const StepLaunch& s, int layer, cudaStream_t stream) {
  const StepDims& d = s.problem->dims;
  StepBuffers& b = *s.buffers;
  const int n = s.problem->batch;
  STEP_PART("indexer/scores",
            LaunchIndexerScores(ScoresOf(s, layer), stream, s.policy));
  STEP_PART("indexer/topk",
            LaunchTopK(b.scores, s.problem->context + 1, d.index_topk, n,
                       b.kept, b.kept_n, stream, s.policy));
  if (!s.record_choices) return OkStatus();
  // The layer's kept sets for the run's result (StepRunResult::kept_tokens).
  const size_t row = size_t(n) * d.index_topk;
  MG_CUDA(cudaMemcpyAsync(b.kept_sets + layer * row, b.kept, row * sizeof(int),
                          cudaMemcpyDeviceToDevice, stream));
  MG_CUDA(cudaMemcpyAsync(b.kept_counts + size_t(layer) * n, b.kept_n,
                          n * sizeof(int), cudaMemcpyDeviceToDevice, stream));
  return OkStatus();
}

// Whether the absorption and the attention's query fragments run on the
// side stream beside the indexer (IndexerAndAbsorb): wherever there is one.
bool SideStreamBeside(const StepLaunch& s) { return s.side != nullptr; }

SparseAttention AttentionOf(const StepLaunch& s, int layer) {
  const StepDims& d = s.problem->dims;
  const StepGeometry& g = s.geo;
  StepBuffers& b = *s.buffers;
  SparseAttention a;
  a.q_lat = b.q_lat;
  a.q = b.q;
  a.q_stride = int64_t{g.heads} * g.head_dim;
  a.q_head_stride = g.head_dim;
  a.rope_offset = d.nope;
  if (s.caches->kv_fp8) {
    a.latent_fp8 = s.caches->latent_bytes(layer);
  } else {
    a.latent = s.caches->latent(layer);
  }
  a.cache_stride = s.caches->tokens;
  a.new_entry = b.kv;
  a.kept = b.kept;
  a.kept_n = b.kept_n;
  a.k = d.index_topk;
  a.heads = g.heads;
  a.kv_lora = d.kv_lora;
  a.rope = d.rope;
  a.context = s.problem->context;
  a.batch = s.problem->batch;
  a.scale = 1.0f / std::sqrt(static_cast<float>(g.head_dim));
  a.out_lat = b.o_lat;
  a.partial = b.attn_partial;
  a.query_frags = b.attn_query_frags;
  a.fresh_dots = b.attn_fresh_dots;
  a.queries_beside = SideStreamBeside(s);
  return a;
}

// values[b][h] = W_UV of head h . o_lat[b][h]: kv_b's value rows of each
// head (every other block of nope + v rows), in kv_b's format.
GpuStatus LaunchValues(const StepLaunch& s, const LayerParams& w,
                       cudaStream_t stream) {
  const StepDims& d = s.problem->dims;
  const StepGeometry& g = s.geo;
  StepBuffers& b = *s.buffers;
  const int n = s.problem->batch, width = g.heads * d.v_dim;
  const int64_t x_stride = int64_t{g.heads} * d.kv_lora;
  if (w.kv_b.nvfp4()) {
    Nvfp4Gemv expand = PlainNvfp4(w.kv_b, width, d.kv_lora, b.o_lat, x_stride,
                                  b.values, width, n);
    expand.rows_per_x = d.v_dim;
    expand.w_group_stride = d.nope + d.v_dim;
    expand.w_group_offset = d.nope;
    expand.x_group_stride = d.kv_lora;
    expand.x_parts = b.gemv_x_parts;
    return LaunchGemvNvfp4(expand, stream, s.policy);
  }
  Bf16Gemv expand = Plain(w.kv_b.bf16, width, d.kv_lora, b.o_lat, x_stride,
                          b.values, width, n);
  expand.rows_per_x = d.v_dim;
  expand.w_group_stride = d.nope + d.v_dim;
  expand.w_group_offset = d.nope;
  expand.x_group_stride = d.kv_lora;
  return LaunchGemvBf16(expand, stream, s.policy);
}

// W_UK of this rank's heads absorbed into the query (q_lat).
AbsorbQuery AbsorbOf(const StepLaunch& s, const LayerParams& w) {
  const StepDims& d = s.problem->dims;
  const StepGeometry& g = s.geo;
  StepBuffers& b = *s.buffers;
  const int n = s.problem->batch;
  AbsorbQuery absorb{w.kv_b.bf16,
                     g.heads,
                     d.nope,
                     d.v_dim,
                     d.kv_lora,
                     b.q,
                     int64_t{g.heads} * g.head_dim,
                     g.head_dim,
                     b.q_lat,
                     n};
  absorb.codes = w.kv_b.codes;
  absorb.scales = w.kv_b.scales;
  absorb.tensor_scale = w.kv_b.tensor_scale;
  return absorb;
}

// Forks the side stream from what `stream` has queued and runs
// launch(side stream, policy) there as part `part`: its first kernel plainly
// (LaunchPolicy::plain_first says why), and at the driver's carveout --
// fitted, the SMs the indexer's kernels have fitted before them keep the
// absorption off, and the side stream ends 5.1 us after the top-k at 8
// sequences instead of 0.6 (the kernel timeline of one step).
template <typename Launch>
GpuStatus LaunchBeside(const StepLaunch& s, const char* part,
                       cudaStream_t stream, Launch&& launch) {
  MG_RETURN_IF_ERROR(s.side->Fork(stream));
  MG_RETURN_IF_ERROR(Observe(s, part, s.side->stream()));
  return launch(s.side->stream(), s.policy.DriverCarveout().PlainFirst());
}

// The queries rotated, the indexer, and with a side stream beside them the
// absorbed queries and then (where the attention takes them made before
// its blocks) their fragments: neither waits for the indexer's choice, so
// neither stays on the chain after it. The absorption reads the queries'
// nope dims, which RoPE leaves, so it forks before the rotation (its blocks
// in before the indexer's); the fragments read the rotated dims and wait
// for it (AttentionOf's queries_beside tells Mla's launch so).
GpuStatus IndexerAndAbsorb(const StepLaunch& s, int layer, const LayerParams& w,
                           cudaStream_t stream) {
  if (!SideStreamBeside(s)) {
    MG_RETURN_IF_ERROR(RotateQueries(s, stream));
    MG_RETURN_IF_ERROR(Indexer(s, layer, stream));
    STEP_PART("mla/absorb",
              LaunchAbsorbQuery(AbsorbOf(s, w), stream, s.policy));
    return OkStatus();
  }
  MG_RETURN_IF_ERROR(
      LaunchBeside(s, "mla/absorb", stream,
                   [&](cudaStream_t side, const LaunchPolicy& policy) {
                     return LaunchAbsorbQuery(AbsorbOf(s, w), side, policy);
                   }));
  MG_RETURN_IF_ERROR(RotateQueries(s, stream));
  MG_RETURN_IF_ERROR(
      LaunchBeside(s, "mla/queries", stream,
                   [&](cudaStream_t side, const LaunchPolicy& policy) {
                     return LaunchAttentionQueries(AttentionOf(s, layer),
                                                   s.sm_count, side, policy);
                   }));
  MG_RETURN_IF_ERROR(Indexer(s, layer, stream));
  MG_RETURN_IF_ERROR(Observe(s, kSideJoined, s.side->stream()));
  return s.side->Join(stream);
}

// Absorbed MLA over the kept tokens, W_UV per head, o_proj's partial sum,
// the residual.
constexpr int kPlainAfterJoinFromBatch = 16;

GpuStatus Mla(const StepLaunch& s, int layer, const LayerParams& w,
              cudaStream_t stream) {
  const StepDims& d = s.problem->dims;
  const StepGeometry& g = s.geo;
  StepBuffers& b = *s.buffers;
  const int n = s.problem->batch, width = g.heads * d.v_dim;
  // After the side stream's join its first kernel goes plainly; below
  // kPlainAfterJoinFromBatch the kernels after it overlap (batch 1 0.04 ms
  // faster); from 16 sequences overlapping them measured 0.7 ms slower at 16
  // and 32, so the combine goes plainly there too (from 8 to 15 sequences
  // the split goes plainly and the combine overlaps).
  LaunchPolicy attention = s.policy;
  if (s.side != nullptr) {
    attention.overlap = s.policy.overlap && !s.problem->dp_attention &&
                        n < kPlainAfterJoinFromBatch;
    attention = attention.PlainFirst();
  }
  STEP_PART("mla/attention",
            LaunchSparseAttention(AttentionOf(s, layer), s.sm_count, stream,
                                  attention));
  STEP_PART("mla/values", LaunchValues(s, w, stream));
  STEP_PART("mla/o_proj",
            LaunchGemv(w.o, d.hidden, width, b.values, width, b.block_out,
                       d.hidden, n, b.gemv_x_parts, stream, s.policy));
  return OkStatus();
}

// Each block leaves its output in *residual for the next block's norm to
// add to the residual stream (a launch a block fewer than adding it apart).
GpuStatus AttentionBlock(const StepLaunch& s, int layer, const LayerParams& w,
                         const float** residual, cudaStream_t stream) {
  const StepDims& d = s.problem->dims;
  StepBuffers& b = *s.buffers;
  STEP_PART(
      "attention/norm",
      LaunchAddRmsNorm(b.h, *residual, w.attn_norm, d.hidden, d.rms_eps,
                       s.problem->batch, {b.xn, d.hidden}, stream, s.policy));
  MG_RETURN_IF_ERROR(QueryAndLatent(s, w, stream));
  MG_RETURN_IF_ERROR(IndexerAndAbsorb(s, layer, w, stream));
  *residual = b.block_out;
  MG_RETURN_IF_ERROR(Mla(s, layer, w, stream));
  MG_RETURN_IF_ERROR(SumOverGang(s, b.block_out, stream));
  if (!s.append) return OkStatus();
  AppendEntries append{b.kv,
                       s.geo.latent_dim,
                       b.ik,
                       d.index_dim,
                       s.problem->batch,
                       s.problem->context,
                       s.caches->tokens,
                       s.caches->latent(layer),
                       s.caches->keys(layer)};
  if (s.caches->kv_fp8) {
    append.latent = nullptr;
    append.latent_fp8 = s.caches->latent_bytes(layer);
    append.kv_lora = d.kv_lora;
  }
  STEP_PART("attention/append", LaunchAppendEntries(append, stream, s.policy));
  return OkStatus();
}

GpuStatus DenseMlp(const StepLaunch& s, const LayerParams& w,
                   const float** residual, cudaStream_t stream) {
  const StepDims& d = s.problem->dims;
  const int slice = s.geo.dense, n = s.problem->batch;
  StepBuffers& b = *s.buffers;
  STEP_PART("dense/norm",
            LaunchAddRmsNorm(b.h, *residual, w.ffn_norm, d.hidden, d.rms_eps, n,
                             {b.xn, d.hidden}, stream, s.policy));
  *residual = b.block_out;
  STEP_PART("dense/gate_up",
            LaunchGemv(w.dense_gu, 2 * slice, d.hidden, b.xn, d.hidden, b.gu,
                       2 * slice, n, b.gemv_x_parts, stream, s.policy));
  STEP_PART("dense/silu",
            LaunchSiluMul(b.gu, slice, n, b.act, stream, s.policy));
  STEP_PART("dense/down",
            LaunchGemv(w.dense_down, d.hidden, slice, b.act, slice, b.block_out,
                       d.hidden, n, b.gemv_x_parts, stream, s.policy));
  return SumOverGang(s, b.block_out, stream);
}

// Appends n floats from the device to *out (synchronous).
GpuStatus AppendDevice(const float* src, size_t n, cudaStream_t stream,
                       std::vector<float>* out) {
  const size_t at = out->size();
  out->resize(at + n);
  MG_CUDA(cudaMemcpyAsync(out->data() + at, src, n * sizeof(float),
                          cudaMemcpyDeviceToHost, stream));
  MG_CUDA(cudaStreamSynchronize(stream));
  return OkStatus();
}

// The trusted path on the layer's own input (its BF16-rounded floats; the
// backend's routing where it differs only by near-ties), and both outputs
// kept for the check.
GpuStatus CheckMoe(const StepLaunch& s, int layer, cudaStream_t stream) {
  StepBuffers& b = *s.buffers;
  const LayerArgs& args = s.moe_args[layer - s.problem->dims.num_dense_layers];
  MG_RETURN_IF_ERROR(RunTrusted(MoeLayerProblem(*s.problem, layer), args.geo,
                                b.moe_x, args.buf.bias, args.buf.topk_idx,
                                b.moe_y, stream));
  const size_t n =
      static_cast<size_t>(MoeTokens(*s.problem)) * s.problem->dims.hidden;
  MG_RETURN_IF_ERROR(AppendDevice(args.buf.y, n, stream, s.moe_output));
  return AppendDevice(b.moe_y, n, stream, s.moe_reference);
}

// Data-parallel attention's dispatch: every rank's normed tokens into
// every rank's MoE input rows (the BF16 the experts read; the floats too
// when the layer is checked, for the trusted path).
GpuStatus GatherMoeInputs(const StepLaunch& s, const LayerArgs& args,
                          cudaStream_t stream) {
  if (s.comm == nullptr) return OkStatus();
  MG_RETURN_IF_ERROR(Observe(s, "comm/all_gather", stream));
  const int64_t own = int64_t{s.problem->batch} * s.problem->dims.hidden;
  std::string why;
  RunStatus st = s.comm->AllGatherInPlace(
      const_cast<uint16_t*>(args.buf.x_bf16), own * 2, stream, &why);
  if (st == RunStatus::kOk && s.moe_output != nullptr) {
    st = s.comm->AllGatherInPlace(s.buffers->moe_x, own * 4, stream, &why);
  }
  return st == RunStatus::kOk ? OkStatus() : Fail(st, why);
}

// Data-parallel attention's combine: the ranks' partial outputs of every
// token summed, each rank its own rows (no gang: its own rows of its
// partial sums stand in for them).
GpuStatus CombineMoeOutputs(const StepLaunch& s, const LayerArgs& args,
                            const float** residual, cudaStream_t stream) {
  const int64_t own = int64_t{s.problem->batch} * s.problem->dims.hidden;
  if (s.comm == nullptr) {
    *residual = args.buf.y + s.problem->shard.rank * own;
    return OkStatus();
  }
  MG_RETURN_IF_ERROR(Observe(s, "comm/reduce_scatter", stream));
  std::string why;
  const RunStatus st = s.comm->ReduceScatterSum(
      args.buf.y, s.buffers->block_out, own, stream, &why);
  if (st != RunStatus::kOk) return Fail(st, why);
  *residual = s.buffers->block_out;
  return OkStatus();
}

// MoE layer `moe`'s routing kept for the run's result: the distinct experts
// its tokens chose, and each token's choices.
GpuStatus RecordRouting(const StepLaunch& s, int moe, cudaStream_t stream) {
  const RunBuffers& buf = s.moe_args[moe].buf;
  StepBuffers& b = *s.buffers;
  MG_CUDA(cudaMemcpyAsync(b.routed + moe, buf.meta + kMetaRouted, sizeof(int),
                          cudaMemcpyDeviceToDevice, stream));
  const size_t choices = MoeChoices(*s.problem);
  MG_CUDA(cudaMemcpyAsync(b.routes + moe * choices, buf.topk_idx,
                          choices * sizeof(int), cudaMemcpyDeviceToDevice,
                          stream));
  return OkStatus();
}

GpuStatus MoeMlp(const StepLaunch& s, int layer, const LayerParams& w,
                 const float** residual, cudaStream_t stream) {
  const StepProblem& p = *s.problem;
  const StepDims& d = p.dims;
  const int n = p.batch, moe = layer - d.num_dense_layers;
  StepBuffers& b = *s.buffers;
  const LayerArgs& args = s.moe_args[moe];
  // This rank's tokens' rows of the MoE input: all of them, or under
  // data-parallel attention its part of every rank's.
  const int64_t rows = p.dp_attention ? int64_t{p.shard.rank} * n : 0;
  NormOut out;
  out.bf16 = const_cast<uint16_t*>(args.buf.x_bf16) + rows * d.hidden;
  out.bf16_float = b.moe_x + rows * d.hidden;
  STEP_PART("moe/norm", LaunchAddRmsNorm(b.h, *residual, w.ffn_norm, d.hidden,
                                         d.rms_eps, n, out, stream, s.policy));
  if (p.dp_attention) MG_RETURN_IF_ERROR(GatherMoeInputs(s, args, stream));
  *residual = args.buf.y;
  // The layer's router takes the driver's carveout (args.launch,
  // PrepareMoeArgs).
  STEP_PART("moe/layer", s.launcher->launch(args, b.workspace.get(), stream));
  if (s.record_choices) MG_RETURN_IF_ERROR(RecordRouting(s, moe, stream));
  if (s.moe_output != nullptr) MG_RETURN_IF_ERROR(CheckMoe(s, layer, stream));
  if (p.dp_attention) return CombineMoeOutputs(s, args, residual, stream);
  return SumOverGang(s, args.buf.y, stream);
}

GpuStatus GatherBest(const StepLaunch& s, cudaStream_t stream);

GpuStatus Head(const StepLaunch& s, const float* residual,
               cudaStream_t stream) {
  const StepDims& d = s.problem->dims;
  StepBuffers& b = *s.buffers;
  const int n = s.problem->batch;
  STEP_PART("lm_head/norm",
            LaunchAddRmsNorm(b.h, residual, s.weights->final_norm, d.hidden,
                             d.rms_eps, n, {b.xn, d.hidden}, stream, s.policy));
  STEP_PART(
      "lm_head/gemv",
      LaunchGemv(s.weights->lm_head, s.geo.vocab, d.hidden, b.xn, d.hidden,
                 b.logits, s.geo.vocab, n, b.gemv_x_parts, stream, s.policy));
  STEP_PART("lm_head/argmax",
            LaunchArgMax(b.logits, s.geo.vocab, n, s.geo.vocab_begin, b.next,
                         stream, s.policy));
  return GatherBest(s, stream);
}

// The gang agrees on each sequence's token: every rank fills its row of a
// zeroed [world][batch] table of (logit, token), the table is summed over
// the gang (exact: one non-zero term an entry), and each rank picks the
// best (the lowest token on a tie, as one argmax over the whole row would).
GpuStatus GatherBest(const StepLaunch& s, cudaStream_t stream) {
  // Data-parallel attention: each rank's argmax is over the whole
  // vocabulary of its own sequences already.
  if (s.comm == nullptr || s.problem->dp_attention) return OkStatus();
  StepBuffers& b = *s.buffers;
  const int n = s.problem->batch;
  STEP_PART("comm/gather_best",
            LaunchPostBest(b.logits, s.geo.vocab, s.geo.vocab_begin, b.next, n,
                           s.comm->rank(), s.world, b.best, stream, s.policy));
  std::string why;
  if (s.comm->AllReduceSum(b.best, int64_t{2} * n * s.world, stream, &why) !=
      RunStatus::kOk) {
    return Fail(RunStatus::kCudaError, why);
  }
  STEP_PART("comm/pick_best",
            LaunchPickBest(b.best, n, s.world, b.next, stream, s.policy));
  return OkStatus();
}

}  // namespace

GpuStatus AllocStepBuffers(const StepProblem& p, const Launcher& launcher,
                           StepBuffers* b) {
  Carver sizing(nullptr);
  CarveStep(p, launcher, sizing, b);
  MG_RETURN_IF_ERROR(b->main.Allocate(sizing.used()));
  Carver c(b->main.get());
  CarveStep(p, launcher, c, b);
  MG_RETURN_IF_ERROR(
      Upload(b->tokens, p.tokens.data(), p.tokens.size() * sizeof(int)));
  MG_RETURN_IF_ERROR(Upload(b->rope_cos, p.rope_cos.data(),
                            p.rope_cos.size() * sizeof(double)));
  MG_RETURN_IF_ERROR(Upload(b->rope_sin, p.rope_sin.data(),
                            p.rope_sin.size() * sizeof(double)));
  MG_RETURN_IF_ERROR(UploadPeerInputs(p, *b));
  const size_t experts = p.dims.moe.num_experts;
  for (size_t l = 0; l < p.router_bias.size(); ++l) {
    MG_RETURN_IF_ERROR(Upload(b->router_bias + l * experts,
                              p.router_bias[l].data(),
                              experts * sizeof(float)));
  }
  LayerArgs args;
  args.geo = MakeGeometry(MoeLayerProblem(p, p.dims.num_dense_layers));
  args.buf = b->moe;
  MG_RETURN_IF_ERROR(b->workspace.Allocate(launcher.workspace_bytes(args)));
  MG_CUDA(cudaDeviceSynchronize());
  return OkStatus();
}

void PrepareMoeArgs(StepLaunch* s, const backends::Tile& tile) {
  const StepProblem& p = *s->problem;
  s->moe_args.clear();
  for (int layer = p.dims.num_dense_layers; layer < p.layers; ++layer) {
    const LayerParams& w = s->weights->layers[layer];
    LayerArgs a;
    a.geo = MakeGeometry(MoeLayerProblem(p, layer));
    a.tile = tile;
    a.gate_up = w.moe->gate_up;
    a.down = w.moe->down;
    a.router_w = w.moe->router.as<uint16_t>();
    a.buf = s->buffers->moe;
    a.buf.bias =
        s->buffers->router_bias +
        size_t(layer - p.dims.num_dense_layers) * p.dims.moe.num_experts;
    a.device = s->device;
    a.sm_count = s->sm_count;
    a.cublas = s->cublas;
    // The router at the driver's carveout (its expert kernels set none):
    // fitted, it measured 125 us a step longer at 8 sequences.
    a.launch = s->policy.DriverCarveout();
    s->moe_args.push_back(a);
  }
}

GpuStatus EnqueueStep(const StepLaunch& s, cudaStream_t stream) {
  const StepProblem& p = *s.problem;
  const float scale = 1.0f / std::sqrt(static_cast<float>(p.dims.hidden));
  STEP_PART("embed",
            LaunchEmbed(s.buffers->tokens, p.batch, p.dims.hidden, p.seed,
                        scale, s.buffers->h, stream, s.policy));
  const float* residual = nullptr;  // a block's output not yet added to h
  for (int layer = 0; layer < p.layers; ++layer) {
    const LayerParams& w = s.weights->layers[layer];
    MG_RETURN_IF_ERROR(AttentionBlock(s, layer, w, &residual, stream));
    MG_RETURN_IF_ERROR(layer < p.dims.num_dense_layers
                           ? DenseMlp(s, w, &residual, stream)
                           : MoeMlp(s, layer, w, &residual, stream));
  }
  MG_RETURN_IF_ERROR(Head(s, residual, stream));
  return Observe(s, kStepEnd, stream);
}

namespace {

// Data-parallel attention's collectives: an all-gather and a reduce-scatter
// a MoE layer.
GpuStatus EnqueueDataParallelCollectives(const StepLaunch& s,
                                         cudaStream_t stream, int* count) {
  for (const LayerArgs& args : s.moe_args) {
    MG_RETURN_IF_ERROR(GatherMoeInputs(s, args, stream));
    const float* residual = nullptr;
    MG_RETURN_IF_ERROR(CombineMoeOutputs(s, args, &residual, stream));
    *count += 2;
  }
  return OkStatus();
}

}  // namespace

GpuStatus EnqueueCollectives(const StepLaunch& s, cudaStream_t stream,
                             int* count) {
  *count = 0;
  if (s.comm == nullptr) return OkStatus();
  if (s.problem->dp_attention)
    return EnqueueDataParallelCollectives(s, stream, count);
  StepBuffers& b = *s.buffers;
  for (int layer = 0; layer < s.problem->layers; ++layer) {
    MG_RETURN_IF_ERROR(SumOverGang(s, b.block_out, stream));
    MG_RETURN_IF_ERROR(SumOverGang(s, b.block_out, stream));
    *count += 2;
  }
  std::string why;
  const int64_t n = int64_t{2} * s.problem->batch * s.world;
  if (s.comm->AllReduceSum(b.best, n, stream, &why) != RunStatus::kOk) {
    return Fail(RunStatus::kCudaError, why);
  }
  ++*count;
  return OkStatus();
}

}  // namespace moetune::gpu
