#include <cmath>

#include "kernels/cuda/moe/run_buffers.cuh"
#include "kernels/cuda/step/step_weights.cuh"
#include "kernels/model/cache_gen.h"
#include "kernels/model/kv_fp8_format.h"
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
__global__ void FillCachesKernel(uint64_t seed, int layer, int first_sequence,
                                 int batch, int prefilled, int stride,
                                 int kv_lora, int rope, int index_dim,
                                 uint16_t* latent, uint8_t* keys) {
  const int dim = kv_lora + rope;
  const int64_t tokens = static_cast<int64_t>(batch) * prefilled;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < tokens * dim; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t token = i / dim;
    const int b = static_cast<int>(token / prefilled);
    const int t = static_cast<int>(token % prefilled),
              d = static_cast<int>(i % dim);
    const int64_t row = static_cast<int64_t>(b) * stride + t;
    const int sequence = first_sequence + b;
    const float v =
        cache::LatentValue(seed, layer, kv_lora, rope, sequence, t, d);
    latent[row * dim + d] = static_cast<uint16_t>(__float_as_uint(v) >> 16);
    if (d < index_dim) {
      keys[row * index_dim + d] =
          cache::IndexKeyByte(seed, layer, index_dim, sequence, t, d);
    }
  }
}

// Where a synthetic FP8 cache token comes from and goes to.
struct Fp8Token {
  uint64_t seed;
  int layer, kv_lora, rope, b, t;
  uint8_t* row;  // its latent row (kvfp8::RowLayoutOf)
  __device__ float Value(int d) const {
    return cache::LatentValue(seed, layer, kv_lora, rope, b, t, d);
  }
};

// Latent group g of the token: its amax, scale and encoded values (the
// hash evaluated twice rather than 128 values held in registers).
__device__ void FillFp8Group(const Fp8Token& k, int g,
                             const kvfp8::RowLayout& layout) {
  const int g0 = g * kvfp8::kGroupSize;
  const int end = min(k.kv_lora, g0 + kvfp8::kGroupSize);
  float amax = 0.0f;
  for (int d = g0; d < end; ++d) amax = fmaxf(amax, fabsf(k.Value(d)));
  const float scale = kvfp8::GroupScale(amax);
  reinterpret_cast<float*>(k.row + layout.scales)[g] = scale;
  for (int d = g0; d < end; ++d) k.row[d] = kvfp8::Encode(k.Value(d), scale);
}

__device__ void FillFp8Rope(const Fp8Token& k, const kvfp8::RowLayout& layout) {
  uint16_t* out = reinterpret_cast<uint16_t*>(k.row + layout.rope);
  for (int r = 0; r < k.rope; ++r) {
    out[r] = static_cast<uint16_t>(__float_as_uint(k.Value(k.kv_lora + r)) >>
                                   16);  // exact: BF16 values
  }
}

// The FP8 cache's synthetic tokens: one thread a (token, part), parts the
// latent's groups of 128, then one part for the rope key and one for the
// indexer key.
__global__ void FillFp8CachesKernel(uint64_t seed, int layer,
                                    int first_sequence, int batch,
                                    int prefilled, int stride, int kv_lora,
                                    int rope, int index_dim, uint8_t* latent,
                                    uint8_t* keys) {
  const int groups = kvfp8::Groups(kv_lora), parts = groups + 2;
  const kvfp8::RowLayout layout = kvfp8::RowLayoutOf(kv_lora, rope);
  const int64_t n = static_cast<int64_t>(batch) * prefilled * parts;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t token = i / parts;
    const int part = static_cast<int>(i % parts);
    const int b = static_cast<int>(token / prefilled);
    const int t = static_cast<int>(token % prefilled);
    const int64_t row = static_cast<int64_t>(b) * stride + t;
    const int sequence = first_sequence + b;
    const Fp8Token k{
        seed, layer, kv_lora, rope, sequence, t, latent + row * layout.bytes};
    if (part < groups) {
      FillFp8Group(k, part, layout);
    } else if (part == groups) {
      FillFp8Rope(k, layout);
    } else {
      for (int d = 0; d < index_dim; ++d) {
        keys[row * index_dim + d] =
            cache::IndexKeyByte(seed, layer, index_dim, sequence, t, d);
      }
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

// A matrix's device buffers, writable while generating, in its format
// (DeviceMatrix's).
struct MatrixBuffers {
  uint16_t* bf16 = nullptr;
  uint8_t *codes = nullptr, *scales = nullptr;
  int64_t k = 0;
};

MatrixBuffers CarveMatrix(Carver& c, int64_t rows, int64_t k, bool nvfp4) {
  MatrixBuffers m;
  m.k = k;
  if (!nvfp4) {
    m.bf16 = c.Take<uint16_t>(size_t(rows * k));
    return m;
  }
  m.codes = c.Take<uint8_t>(size_t(nvfp4::CodeBytes(rows, k)));
  m.scales = c.Take<uint8_t>(size_t(nvfp4::ScaleBytes(rows, k)));
  return m;
}

DeviceMatrix Matrix(const MatrixBuffers& m) {
  DeviceMatrix d;
  d.bf16 = m.bf16;
  d.codes = m.codes;
  d.scales = m.scales;
  if (m.bf16 == nullptr) d.tensor_scale = weights::Nvfp4TensorScale(m.k);
  return d;
}

// The slice in the matrix's format, `row_offset` rows into it: the same
// hash read as BF16 values or as NVFP4 codes and scales (the reference's
// ProjectionDesc).
GpuStatus FillMatrix(const Slice& s, const MatrixBuffers& m,
                     int64_t row_offset = 0) {
  if (m.bf16 != nullptr) return FillBf16(s, m.bf16 + row_offset * s.cols);
  return FillNvfp4(s, m.codes + row_offset * s.cols / 2,
                   m.scales + row_offset * s.cols / 16);
}

// The device buffers of one layer, writable while generating.
struct LayerBuffers {
  float *attn_norm, *ffn_norm, *q_a_norm, *kv_a_norm, *key_norm, *key_bias;
  MatrixBuffers q_a, kv_a, q_b, kv_b, o, index_q, index_k, index_w;
  MatrixBuffers gu, down;  // dense layers
};

// Carves one layer's buffers (sizes only, with a null base).
LayerBuffers CarveLayer(const StepProblem& p, const StepGeometry& g, int layer,
                        Carver& c) {
  const StepDims& d = p.dims;
  const bool a4 = p.formats.attention_nvfp4;
  LayerBuffers b{};
  b.attn_norm = c.Take<float>(d.hidden);
  b.ffn_norm = c.Take<float>(d.hidden);
  b.q_a_norm = c.Take<float>(d.q_lora);
  b.kv_a_norm = c.Take<float>(d.kv_lora);
  b.key_norm = c.Take<float>(d.index_dim);
  b.key_bias = c.Take<float>(d.index_dim);
  // Matrices of one input back to back (BF16 rows of 2 * hidden bytes, a
  // multiple of 256 at GLM-5's dims): one GEMV launch reads each group
  // (step_launch.cu).
  b.q_a = CarveMatrix(c, d.q_lora, d.hidden, a4);
  b.kv_a = CarveMatrix(c, g.latent_dim, d.hidden, a4);
  b.index_k = CarveMatrix(c, d.index_dim, d.hidden, a4);
  b.index_w = CarveMatrix(c, d.index_heads, d.hidden, a4);
  b.q_b = CarveMatrix(c, int64_t(g.heads) * g.head_dim, d.q_lora, a4);
  b.index_q =
      CarveMatrix(c, int64_t(d.index_heads) * d.index_dim, d.q_lora, a4);
  b.kv_b = CarveMatrix(c, int64_t(g.heads) * (d.nope + d.v_dim), d.kv_lora, a4);
  b.o = CarveMatrix(c, d.hidden, int64_t(g.heads) * d.v_dim, a4);
  if (layer < d.num_dense_layers) {
    const bool dense4 = !p.formats.dense_bf16;
    b.gu = CarveMatrix(c, 2 * int64_t(g.dense), d.hidden, dense4);
    b.down = CarveMatrix(c, d.hidden, g.dense, dense4);
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
      FillMatrix(Whole(p, layer, weights::kQA, d.q_lora, d.hidden), b.q_a));
  MG_RETURN_IF_ERROR(FillMatrix(
      Whole(p, layer, weights::kKVA, g.latent_dim, d.hidden), b.kv_a));
  MG_RETURN_IF_ERROR(FillMatrix(q_b, b.q_b));
  MG_RETURN_IF_ERROR(FillMatrix(kv_b, b.kv_b));
  MG_RETURN_IF_ERROR(FillMatrix(o, b.o));
  MG_RETURN_IF_ERROR(
      FillMatrix(Whole(p, layer, weights::kIndexerQB,
                       int64_t(d.index_heads) * d.index_dim, d.q_lora),
                 b.index_q));
  MG_RETURN_IF_ERROR(FillMatrix(
      Whole(p, layer, weights::kIndexerK, d.index_dim, d.hidden), b.index_k));
  return FillMatrix(
      Whole(p, layer, weights::kIndexerWeights, d.index_heads, d.hidden),
      b.index_w);
}

// The rank's gate rows, up rows (gate_up [2 * inter][hidden]) and down
// columns (down [hidden][inter]), in the dense MLP's format.
GpuStatus FillDense(const StepProblem& p, const StepGeometry& g, int layer,
                    const LayerBuffers& b) {
  const StepDims& d = p.dims;
  Slice gate = Whole(p, layer, weights::kDenseGateUp, g.dense, d.hidden);
  gate.row_begin = g.dense_begin;
  Slice up = gate;
  up.row_begin = d.dense_inter + g.dense_begin;
  MG_RETURN_IF_ERROR(FillMatrix(gate, b.gu));
  MG_RETURN_IF_ERROR(FillMatrix(up, b.gu, g.dense));
  Slice down = Whole(p, layer, weights::kDenseDown, d.hidden, g.dense);
  down.k_full = d.dense_inter;
  down.col_begin = g.dense_begin;
  return FillMatrix(down, b.down);
}

LayerParams Params(const LayerBuffers& b, const StepDims& d) {
  LayerParams l;
  l.attn_norm = b.attn_norm;
  l.ffn_norm = b.ffn_norm;
  l.q_a_norm = b.q_a_norm;
  l.kv_a_norm = b.kv_a_norm;
  l.key_norm = b.key_norm;
  l.key_bias = b.key_bias;
  l.q_a = Matrix(b.q_a);
  l.kv_a = Matrix(b.kv_a);
  l.q_b = Matrix(b.q_b);
  l.kv_b = Matrix(b.kv_b);
  l.o = Matrix(b.o);
  l.index_q = Matrix(b.index_q);
  l.index_k = Matrix(b.index_k);
  l.index_w = Matrix(b.index_w);
  l.dense_gu = Matrix(b.gu);
  l.dense_down = Matrix(b.down);
  // The tensor scale is the whole tensor's: down's reduction is the whole
  // intermediate dim, not the rank's slice (the reference's desc).
  if (l.dense_down.nvfp4()) {
    l.dense_down.tensor_scale = weights::Nvfp4TensorScale(d.dense_inter);
  }
  if (l.o.nvfp4()) {
    l.o.tensor_scale = weights::Nvfp4TensorScale(int64_t(d.heads) * d.v_dim);
  }
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
  const MatrixBuffers lm_head =
      CarveMatrix(c, g.vocab, d.hidden, p.formats.lm_head_nvfp4);
  if (!fill) return OkStatus();
  MG_RETURN_IF_ERROR(
      UploadNorm(p, 0, weights::kFinalNorm, d.hidden, 1, final_norm));
  Slice head = Whole(p, 0, weights::kLmHead, g.vocab, d.hidden);
  head.row_begin = g.vocab_begin;
  MG_RETURN_IF_ERROR(FillMatrix(head, lm_head));
  w->final_norm = final_norm;
  w->lm_head = Matrix(lm_head);
  return OkStatus();
}

// Bytes of one token's latent row in the problem's cache format.
int64_t LatentRowBytes(const StepProblem& p) {
  if (p.formats.kv_fp8) {
    return kvfp8::RowLayoutOf(p.dims.kv_lora, p.dims.rope).bytes;
  }
  return 2 * int64_t{p.dims.kv_lora + p.dims.rope};
}

int64_t LatentCacheBytes(const StepProblem& p) {
  return int64_t{p.batch} * CacheTokens(p) * LatentRowBytes(p);
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
         hidden == o.hidden && vocab == o.vocab && experts == o.experts &&
         attention_nvfp4 == o.attention_nvfp4 && dense_bf16 == o.dense_bf16 &&
         lm_head_nvfp4 == o.lm_head_nvfp4 && dp_attention == o.dp_attention;
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
  k.attention_nvfp4 = p.formats.attention_nvfp4;
  k.dense_bf16 = p.formats.dense_bf16;
  k.lm_head_nvfp4 = p.formats.lm_head_nvfp4;
  k.dp_attention = p.dp_attention;
  return k;
}

uint16_t* StepCaches::latent(int layer) const {
  return reinterpret_cast<uint16_t*>(latent_bytes(layer));
}

uint8_t* StepCaches::latent_bytes(int layer) const {
  return reinterpret_cast<uint8_t*>(buffer.as<char>() + layer * layer_stride);
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
  m.batch = MoeTokens(p);
  m.shard = p.shard;
  return m;
}

StepGeometry MakeStepGeometry(const StepProblem& p) {
  const StepDims& d = p.dims;
  StepGeometry g;
  // Data-parallel attention: the split parts whole on every rank.
  g.world = p.dp_attention ? 1 : World(p);
  g.rank = p.dp_attention ? 0 : p.shard.rank;
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
  return (Align256(LatentCacheBytes(p)) + Align256(KeyCacheBytes(p))) *
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

namespace {

// The synthetic tokens of one layer's caches, in the latent's format.
GpuStatus FillCaches(const StepProblem& p, const StepCaches& c, int layer) {
  const int prefilled = Prefilled(p);
  const StepDims& d = p.dims;
  if (int64_t{p.batch} * prefilled == 0) return OkStatus();
  if (p.formats.kv_fp8) {
    const int64_t parts =
        int64_t{p.batch} * prefilled * (kvfp8::Groups(d.kv_lora) + 2);
    FillFp8CachesKernel<<<FillGrid(parts), kFillThreads>>>(
        p.seed, layer, p.first_sequence, p.batch, prefilled, CacheTokens(p),
        d.kv_lora, d.rope, d.index_dim, c.latent_bytes(layer), c.keys(layer));
  } else {
    const int64_t elements =
        int64_t{p.batch} * prefilled * (d.kv_lora + d.rope);
    FillCachesKernel<<<FillGrid(elements), kFillThreads>>>(
        p.seed, layer, p.first_sequence, p.batch, prefilled, CacheTokens(p),
        d.kv_lora, d.rope, d.index_dim, c.latent(layer), c.keys(layer));
  }
  MG_CHECK_LAUNCH();
  return OkStatus();
}

}  // namespace

GpuStatus GenerateStepCaches(const StepProblem& p, StepCaches* c) {
  const int64_t latent = LatentCacheBytes(p), keys = KeyCacheBytes(p);
  c->buffer.Reset();
  c->layer_stride = Align256(latent) + Align256(keys);
  c->keys_offset = Align256(latent);
  c->kv_fp8 = p.formats.kv_fp8;
  c->latent_row_bytes = LatentRowBytes(p);
  MG_RETURN_IF_ERROR(c->buffer.Allocate(c->layer_stride * p.layers));
  // Room for appended tokens reads as zeros until a step writes it.
  MG_CUDA(cudaMemset(c->buffer.get(), 0, c->layer_stride * p.layers));
  for (int layer = 0; layer < p.layers; ++layer) {
    MG_RETURN_IF_ERROR(FillCaches(p, *c, layer));
  }
  MG_CUDA(cudaDeviceSynchronize());
  const int prefilled = Prefilled(p);
  c->batch = p.batch;
  c->first_sequence = p.first_sequence;
  c->prefilled = prefilled;
  c->tokens = CacheTokens(p);
  c->bytes = c->layer_stride * p.layers;
  return OkStatus();
}

}  // namespace moetune::gpu
