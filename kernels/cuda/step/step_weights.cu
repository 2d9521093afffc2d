#include <cmath>

#include "kernels/cuda/run_buffers.cuh"
#include "kernels/cuda/step/step_weights.cuh"
#include "kernels/model/cache_gen.h"
#include "kernels/model/nvfp4_format.h"
#include "kernels/model/weight_gen.h"

namespace moetune::gpu {
namespace {

constexpr int kFillThreads = 256;
constexpr int kFillBlocks = 4096;  // grid-stride beyond this

// Where in the hash a BF16 or NVFP4 slice comes from.
struct Slice {
  uint64_t seed = 0;
  uint32_t layer = 0, tensor = 0;
  int64_t rows = 0, cols = 0;  // the slice
  int64_t row_begin = 0, col_begin = 0, k_full = 0;
};

float Bf16Scale(int64_t k) { return 1.0f / std::sqrt(static_cast<float>(k)); }

__global__ void FillBf16Kernel(Slice s, float scale, uint16_t* out) {
  const int64_t n = s.rows * s.cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / s.cols, c = i % s.cols;
    const uint64_t index = (s.row_begin + r) * s.k_full + s.col_begin + c;
    const float w =
        weights::Bf16Weight(s.seed, s.layer, s.tensor, index, scale);
    out[i] = static_cast<uint16_t>(__float_as_uint(w) >> 16);  // exact
  }
}

// Codes [rows][cols / 2] and block scales [rows][cols / 16] of the slice.
__global__ void FillNvfp4Kernel(Slice s, uint8_t* codes, uint8_t* scales) {
  const int64_t code_cols = s.cols / 2, scale_cols = s.cols / 16;
  const int64_t n = s.rows * code_cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / code_cols, j = i % code_cols;
    const int64_t row = s.row_begin + r;
    codes[i] = weights::Nvfp4CodeByte(
        s.seed, s.layer, s.tensor, row * (s.k_full / 2) + s.col_begin / 2 + j);
    if (j < scale_cols) {
      scales[r * scale_cols + j] =
          weights::Nvfp4ScaleByte(s.seed, s.layer, s.tensor,
                                  row * (s.k_full / 16) + s.col_begin / 16 + j);
    }
  }
}

// The synthetic tokens t < prefilled of each sequence's caches, rows
// `stride` tokens apart.
__global__ void FillCachesKernel(uint64_t seed, int layer, int batch,
                                 int prefilled, int stride, int kv_lora,
                                 int rope, int index_dim, uint16_t* latent,
                                 uint8_t* keys) {
  const int dim = kv_lora + rope;
  const int64_t tokens = static_cast<int64_t>(batch) * prefilled;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < tokens * dim; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t token = i / dim;
    const int b = static_cast<int>(token / prefilled);
    const int t = static_cast<int>(token % prefilled),
              d = static_cast<int>(i % dim);
    const int64_t row = static_cast<int64_t>(b) * stride + t;
    const float v = cache::LatentValue(seed, layer, kv_lora, rope, b, t, d);
    latent[row * dim + d] = static_cast<uint16_t>(__float_as_uint(v) >> 16);
    if (d < index_dim) {
      keys[row * index_dim + d] =
          cache::IndexKeyByte(seed, layer, index_dim, b, t, d);
    }
  }
}

int FillGrid(int64_t n) {
  return static_cast<int>(
      std::min<int64_t>(kFillBlocks, (n + kFillThreads - 1) / kFillThreads));
}

GpuStatus FillBf16(const Slice& s, uint16_t* out) {
  FillBf16Kernel<<<FillGrid(s.rows * s.cols), kFillThreads>>>(
      s, Bf16Scale(s.k_full), out);
  MG_CHECK_LAUNCH();
  return OkStatus();
}

GpuStatus FillNvfp4(const Slice& s, uint8_t* codes, uint8_t* scales) {
  FillNvfp4Kernel<<<FillGrid(s.rows * s.cols / 2), kFillThreads>>>(s, codes,
                                                                   scales);
  MG_CHECK_LAUNCH();
  return OkStatus();
}

// The device buffers of one layer, writable while generating.
struct LayerBuffers {
  float *attn_norm, *ffn_norm, *q_a_norm, *kv_a_norm, *key_norm, *key_bias;
  uint16_t *q_a, *kv_a, *q_b, *kv_b, *o, *index_q, *index_k, *index_w;
  uint8_t *gu_codes, *gu_scales, *down_codes, *down_scales;
};

// Carves one layer's buffers (sizes only, with a null base).
LayerBuffers CarveLayer(const StepProblem& p, const StepGeometry& g, int layer,
                        Carver& c) {
  const StepDims& d = p.dims;
  LayerBuffers b{};
  b.attn_norm = c.Take<float>(d.hidden);
  b.ffn_norm = c.Take<float>(d.hidden);
  b.q_a_norm = c.Take<float>(d.q_lora);
  b.kv_a_norm = c.Take<float>(d.kv_lora);
  b.key_norm = c.Take<float>(d.index_dim);
  b.key_bias = c.Take<float>(d.index_dim);
  // Matrices of one input back to back (rows of 2 * hidden bytes, a
  // multiple of 256 at GLM-5's dims): one GEMV launch reads each group
  // (step_launch.cu).
  b.q_a = c.Take<uint16_t>(size_t(d.q_lora) * d.hidden);
  b.kv_a = c.Take<uint16_t>(size_t(g.latent_dim) * d.hidden);
  b.index_k = c.Take<uint16_t>(size_t(d.index_dim) * d.hidden);
  b.index_w = c.Take<uint16_t>(size_t(d.index_heads) * d.hidden);
  b.q_b = c.Take<uint16_t>(size_t(g.heads) * g.head_dim * d.q_lora);
  b.index_q = c.Take<uint16_t>(size_t(d.index_heads) * d.index_dim * d.q_lora);
  b.kv_b = c.Take<uint16_t>(size_t(g.heads) * (d.nope + d.v_dim) * d.kv_lora);
  b.o = c.Take<uint16_t>(size_t(d.hidden) * g.heads * d.v_dim);
  if (layer < d.num_dense_layers) {
    b.gu_codes = c.Take<uint8_t>(size_t(2) * g.dense * d.hidden / 2);
    b.gu_scales = c.Take<uint8_t>(size_t(2) * g.dense * d.hidden / 16);
    b.down_codes = c.Take<uint8_t>(size_t(d.hidden) * g.dense / 2);
    b.down_scales = c.Take<uint8_t>(size_t(d.hidden) * g.dense / 16);
  }
  return b;
}

// The norms' parameters, from the hash on the host: 1 + noise (gammas) or
// noise (the key norm's bias), BF16-rounded (kernels/reference
// model_weights.h NormGamma, NormBias).
GpuStatus UploadNorm(const StepProblem& p, int layer, uint32_t tensor, int n,
                     float offset, float* out) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    v[i] = offset + weights::Bf16Weight(p.seed, static_cast<uint32_t>(layer),
                                        tensor, static_cast<uint64_t>(i), 0.1f);
  }
  MG_CUDA(cudaMemcpy(out, v.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  return OkStatus();
}

GpuStatus FillNorms(const StepProblem& p, int layer, const LayerBuffers& b) {
  const StepDims& d = p.dims;
  MG_RETURN_IF_ERROR(
      UploadNorm(p, layer, weights::kAttnNorm, d.hidden, 1, b.attn_norm));
  MG_RETURN_IF_ERROR(
      UploadNorm(p, layer, weights::kFfnNorm, d.hidden, 1, b.ffn_norm));
  MG_RETURN_IF_ERROR(
      UploadNorm(p, layer, weights::kQANorm, d.q_lora, 1, b.q_a_norm));
  MG_RETURN_IF_ERROR(
      UploadNorm(p, layer, weights::kKVANorm, d.kv_lora, 1, b.kv_a_norm));
  MG_RETURN_IF_ERROR(
      UploadNorm(p, layer, weights::kIndexerKNorm, d.index_dim, 1, b.key_norm));
  return UploadNorm(p, layer, weights::kIndexerKNormBias, d.index_dim, 0,
                    b.key_bias);
}

Slice Whole(const StepProblem& p, int layer, uint32_t tensor, int64_t rows,
            int64_t k) {
  return Slice{p.seed, static_cast<uint32_t>(layer), tensor, rows, k, 0, 0, k};
}

GpuStatus FillAttention(const StepProblem& p, const StepGeometry& g, int layer,
                        const LayerBuffers& b) {
  const StepDims& d = p.dims;
  const int64_t kv_rows = d.nope + d.v_dim;
  Slice q_b =
      Whole(p, layer, weights::kQB, int64_t(g.heads) * g.head_dim, d.q_lora);
  q_b.row_begin = int64_t(g.head_begin) * g.head_dim;
  Slice kv_b = Whole(p, layer, weights::kKVB, g.heads * kv_rows, d.kv_lora);
  kv_b.row_begin = g.head_begin * kv_rows;
  Slice o = Whole(p, layer, weights::kO, d.hidden, int64_t(g.heads) * d.v_dim);
  o.k_full = int64_t(d.heads) * d.v_dim;
  o.col_begin = int64_t(g.head_begin) * d.v_dim;
  MG_RETURN_IF_ERROR(
      FillBf16(Whole(p, layer, weights::kQA, d.q_lora, d.hidden), b.q_a));
  MG_RETURN_IF_ERROR(
      FillBf16(Whole(p, layer, weights::kKVA, g.latent_dim, d.hidden), b.kv_a));
  MG_RETURN_IF_ERROR(FillBf16(q_b, b.q_b));
  MG_RETURN_IF_ERROR(FillBf16(kv_b, b.kv_b));
  MG_RETURN_IF_ERROR(FillBf16(o, b.o));
  MG_RETURN_IF_ERROR(
      FillBf16(Whole(p, layer, weights::kIndexerQB,
                     int64_t(d.index_heads) * d.index_dim, d.q_lora),
               b.index_q));
  MG_RETURN_IF_ERROR(FillBf16(
      Whole(p, layer, weights::kIndexerK, d.index_dim, d.hidden), b.index_k));
  return FillBf16(
      Whole(p, layer, weights::kIndexerWeights, d.index_heads, d.hidden),
      b.index_w);
}

// The rank's gate rows, up rows (gate_up [2 * inter][hidden]) and down
// columns (down [hidden][inter]).
GpuStatus FillDense(const StepProblem& p, const StepGeometry& g, int layer,
                    const LayerBuffers& b) {
  const StepDims& d = p.dims;
  Slice gate = Whole(p, layer, weights::kDenseGateUp, g.dense, d.hidden);
  gate.row_begin = g.dense_begin;
  Slice up = gate;
  up.row_begin = d.dense_inter + g.dense_begin;
  const size_t half_codes = size_t(g.dense) * d.hidden / 2;
  const size_t half_scales = size_t(g.dense) * d.hidden / 16;
  MG_RETURN_IF_ERROR(FillNvfp4(gate, b.gu_codes, b.gu_scales));
  MG_RETURN_IF_ERROR(
      FillNvfp4(up, b.gu_codes + half_codes, b.gu_scales + half_scales));
  Slice down = Whole(p, layer, weights::kDenseDown, d.hidden, g.dense);
  down.k_full = d.dense_inter;
  down.col_begin = g.dense_begin;
  return FillNvfp4(down, b.down_codes, b.down_scales);
}

LayerParams Params(const LayerBuffers& b, const StepDims& d) {
  LayerParams l;
  l.attn_norm = b.attn_norm;
  l.ffn_norm = b.ffn_norm;
  l.q_a_norm = b.q_a_norm;
  l.kv_a_norm = b.kv_a_norm;
  l.key_norm = b.key_norm;
  l.key_bias = b.key_bias;
  l.q_a = b.q_a;
  l.kv_a = b.kv_a;
  l.q_b = b.q_b;
  l.kv_b = b.kv_b;
  l.o = b.o;
  l.index_q = b.index_q;
  l.index_k = b.index_k;
  l.index_w = b.index_w;
  l.dense_gu_codes = b.gu_codes;
  l.dense_gu_scales = b.gu_scales;
  l.dense_down_codes = b.down_codes;
  l.dense_down_scales = b.down_scales;
  l.dense_gu_scale = weights::Nvfp4TensorScale(d.hidden);
  l.dense_down_scale = weights::Nvfp4TensorScale(d.dense_inter);
  return l;
}

// Carves every layer and the lm_head; fills when `fill`.
GpuStatus CarveAll(const StepProblem& p, const StepGeometry& g, Carver& c,
                   bool fill, StepWeights* w) {
  const StepDims& d = p.dims;
  for (int layer = 0; layer < p.layers; ++layer) {
    const LayerBuffers b = CarveLayer(p, g, layer, c);
    if (!fill) continue;
    MG_RETURN_IF_ERROR(FillNorms(p, layer, b));
    MG_RETURN_IF_ERROR(FillAttention(p, g, layer, b));
    if (layer < d.num_dense_layers)
      MG_RETURN_IF_ERROR(FillDense(p, g, layer, b));
    w->layers.push_back(Params(b, d));
  }
  float* final_norm = c.Take<float>(d.hidden);
  uint16_t* lm_head = c.Take<uint16_t>(size_t(g.vocab) * d.hidden);
  if (!fill) return OkStatus();
  MG_RETURN_IF_ERROR(
      UploadNorm(p, 0, weights::kFinalNorm, d.hidden, 1, final_norm));
  Slice head = Whole(p, 0, weights::kLmHead, g.vocab, d.hidden);
  head.row_begin = g.vocab_begin;
  MG_RETURN_IF_ERROR(FillBf16(head, lm_head));
  w->final_norm = final_norm;
  w->lm_head = lm_head;
  return OkStatus();
}

int64_t LatentCacheElements(const StepProblem& p) {
  return int64_t{p.batch} * CacheTokens(p) * (p.dims.kv_lora + p.dims.rope);
}

int64_t KeyCacheBytes(const StepProblem& p) {
  return int64_t{p.batch} * CacheTokens(p) * p.dims.index_dim;
}

size_t DensePartBytes(const StepProblem& p, const StepGeometry& g) {
  Carver sizing(nullptr);
  (void)CarveAll(p, g, sizing, false, nullptr);
  return sizing.used();
}

}  // namespace

bool StepWeightKey::operator==(const StepWeightKey& o) const {
  return device == o.device && seed == o.seed && layers == o.layers &&
         shard.tp == o.shard.tp && shard.ep == o.shard.ep &&
         shard.rank == o.shard.rank && layout == o.layout &&
         hidden == o.hidden && vocab == o.vocab && experts == o.experts;
}

StepWeightKey WeightKeyOf(const StepProblem& p, int device,
                          WeightLayout layout) {
  StepWeightKey k;
  k.device = device;
  k.seed = p.seed;
  k.layers = p.layers;
  k.shard = p.shard;
  k.layout = layout;
  k.hidden = p.dims.hidden;
  k.vocab = p.dims.vocab;
  k.experts = p.dims.moe.num_experts;
  return k;
}

uint16_t* StepCaches::latent(int layer) const {
  return reinterpret_cast<uint16_t*>(buffer.as<char>() + layer * layer_stride);
}

uint8_t* StepCaches::keys(int layer) const {
  return reinterpret_cast<uint8_t*>(buffer.as<char>() + layer * layer_stride +
                                    keys_offset);
}

MoeProblem MoeLayerProblem(const StepProblem& p, int layer) {
  MoeProblem m;
  m.dims = p.dims.moe;
  m.seed = p.seed;
  m.layer = layer;
  m.batch = p.batch;
  m.shard = p.shard;
  return m;
}

StepGeometry MakeStepGeometry(const StepProblem& p) {
  const StepDims& d = p.dims;
  StepGeometry g;
  g.world = p.shard.tp * p.shard.ep;
  g.rank = p.shard.rank;
  g.heads = d.heads / g.world;
  g.head_begin = g.rank * g.heads;
  g.dense = d.dense_inter / g.world;
  g.dense_begin = g.rank * g.dense;
  g.vocab = d.vocab / g.world;
  g.vocab_begin = g.rank * g.vocab;
  g.head_dim = d.nope + d.rope;
  g.latent_dim = d.kv_lora + d.rope;
  return g;
}

int64_t StepWeightBytes(const StepProblem& p, WeightLayout) {
  int64_t bytes = static_cast<int64_t>(DensePartBytes(p, MakeStepGeometry(p)));
  for (int layer = p.dims.num_dense_layers; layer < p.layers; ++layer) {
    bytes += static_cast<int64_t>(
        LayerWeightBytes(MakeGeometry(MoeLayerProblem(p, layer))));
  }
  return bytes;
}

int64_t StepCacheBytes(const StepProblem& p) {
  return (Align256(LatentCacheElements(p) * 2) + Align256(KeyCacheBytes(p))) *
         p.layers;
}

GpuStatus GenerateStepWeights(const StepProblem& p, int device,
                              WeightLayout layout, StepWeights* w) {
  *w = StepWeights();
  const StepGeometry g = MakeStepGeometry(p);
  MG_RETURN_IF_ERROR(w->dense_part.Allocate(DensePartBytes(p, g)));
  Carver carver(w->dense_part.get());
  MG_RETURN_IF_ERROR(CarveAll(p, g, carver, true, w));
  w->bytes = static_cast<int64_t>(w->dense_part.bytes());
  for (int layer = p.dims.num_dense_layers; layer < p.layers; ++layer) {
    auto set = std::make_unique<WeightSet>();
    const MoeProblem m = MoeLayerProblem(p, layer);
    MG_RETURN_IF_ERROR(GenerateWeights(m, device, layout, set.get()));
    w->bytes += static_cast<int64_t>(LayerWeightBytes(MakeGeometry(m)));
    w->layers[layer].moe = set.get();
    w->moe.push_back(std::move(set));
  }
  MG_CUDA(cudaDeviceSynchronize());
  w->key = WeightKeyOf(p, device, layout);
  return OkStatus();
}

GpuStatus GenerateStepCaches(const StepProblem& p, StepCaches* c) {
  const int64_t latent = LatentCacheElements(p), keys = KeyCacheBytes(p);
  c->buffer.Reset();
  c->layer_stride = Align256(latent * 2) + Align256(keys);
  c->keys_offset = Align256(latent * 2);
  MG_RETURN_IF_ERROR(c->buffer.Allocate(c->layer_stride * p.layers));
  // Room for appended tokens reads as zeros until a step writes it.
  MG_CUDA(cudaMemset(c->buffer.get(), 0, c->layer_stride * p.layers));
  const int prefilled = Prefilled(p);
  const int64_t synthetic =
      int64_t{p.batch} * prefilled * (p.dims.kv_lora + p.dims.rope);
  for (int layer = 0; layer < p.layers && synthetic > 0; ++layer) {
    FillCachesKernel<<<FillGrid(synthetic), kFillThreads>>>(
        p.seed, layer, p.batch, prefilled, CacheTokens(p), p.dims.kv_lora,
        p.dims.rope, p.dims.index_dim, c->latent(layer), c->keys(layer));
    MG_CHECK_LAUNCH();
  }
  MG_CUDA(cudaDeviceSynchronize());
  c->batch = p.batch;
  c->prefilled = prefilled;
  c->tokens = CacheTokens(p);
  c->bytes = c->layer_stride * p.layers;
  return OkStatus();
}

}  // namespace moetune::gpu
