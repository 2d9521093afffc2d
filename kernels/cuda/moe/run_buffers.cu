#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cuda/moe/run_buffers.cuh"

namespace moetune::gpu {
namespace {

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

// One expert's gate_up and down on this rank: E2M1 codes (half a byte a
// weight) and E4M3 scales (one a block of 16).
double ExpertSliceBytes(const Geometry& g) {
  const double weights = 3.0 * g.inter_local * g.hidden;
  return weights * 0.5 + weights / 16.0;
}

// The run's buffers, carved from one allocation: run once with no memory to
// size them, then over the allocation (a second, hand-kept list of sizes
// once fell out of step with it and overran the allocation).
GpuStatus CarveRun(LayerArgs* a, const Launcher& launcher, RunState* st,
                   uint16_t** x_bf16, float** bias) {
  const size_t bh = static_cast<size_t>(a->geo.batch) * a->geo.hidden;
  auto carve = [&](Carver& c) {
    *x_bf16 = c.Take<uint16_t>(bh);
    *bias = c.Take<float>(a->geo.experts);
    CarveLayerBuffers(a->geo, launcher, c, &a->buf);
    st->x_float = c.Take<float>(bh);
    st->y_ref = c.Take<float>(bh);
  };
  Carver sizing(nullptr);
  carve(sizing);
  MG_RETURN_IF_ERROR(st->main.Allocate(sizing.used()));
  Carver c(st->main.get());
  carve(c);
  a->buf.x_bf16 = *x_bf16;
  a->buf.bias = *bias;
  return OkStatus();
}

}  // namespace

void CarveLayerBuffers(const Geometry& g, const Launcher& launcher, Carver& c,
                       RunBuffers* out) {
  const size_t bh = static_cast<size_t>(g.batch) * g.hidden, k = g.top_k;
  const size_t s = g.max_slots, pos = g.max_positions, il = g.inter_local;
  RunBuffers& b = *out;
  const bool fp8 =  // fused_gemv_fp8, the one backend with FP8 activations
      launcher.weight_layout == WeightLayout::kE4m3Bits;
  b.x16 = c.Take<__half>(bh);
  b.logits = c.Take<float>(size_t(g.batch) * g.experts);
  b.router_counter = c.Take<int>(1);
  b.topk_idx = c.Take<int>(g.batch * k);
  b.topk_w = c.Take<float>(g.batch * k);
  b.tok_pos = c.Take<int>(g.batch * (k + 1));
  b.meta = c.Take<int>(kMetaCount);
  b.slot_expert = c.Take<int>(std::max<size_t>(s, 32));  // a warp reads 32
  b.slot_tok_off = c.Take<int>(s);
  b.slot_ntok = c.Take<int>(s);
  b.tile_prefix = c.Take<int>(s + 1);
  b.tile_info = c.Take<int2>(g.max_tiles);
  b.tok_list = c.Take<int>(pos);
  b.tok_w = c.Take<float>(pos);
  b.gu_partial = c.Take<float>(pos * 2 * il);
  // Indexed by slot (one kernel for all slots, or the narrow ones) or by
  // tile (fused_gemv's wide kernel); max_tiles >= max_slots.
  b.gu_counters = c.Take<int>(g.max_tiles * (il / 8 + 1));
  b.h = c.Take<__half>(pos * il);
  b.y = c.Take<float>(bh);
  if (fp8) {  // only its backend reads them (8 bytes a value)
    b.x_fp8 = c.Take<uint8_t>(bh * 8);  // zero where no value goes
    b.x_fp8_inv = c.Take<float>(bh / 16);
    b.h_fp8 = c.Take<uint8_t>(pos * il * 8);
    b.h_fp8_inv = c.Take<float>(pos * il / 16);
  }
}

GpuStatus UploadBf16Input(const float* input, size_t n, uint16_t* bits,
                          float* floats) {
  std::vector<uint16_t> b(n);
  std::vector<float> rounded(n);
  for (size_t i = 0; i < n; ++i) {
    b[i] = Bf16Bits(input[i]);
    rounded[i] = Bf16ToFloat(b[i]);
  }
  MG_CUDA(cudaMemcpy(bits, b.data(), n * 2, cudaMemcpyHostToDevice));
  MG_CUDA(cudaMemcpy(floats, rounded.data(), n * 4, cudaMemcpyHostToDevice));
  return OkStatus();
}

GpuStatus AllocRun(const MoeProblem& p, LayerArgs* a, const Launcher& launcher,
                   RunState* st) {
  uint16_t* x_bf16 = nullptr;
  float* bias = nullptr;
  MG_RETURN_IF_ERROR(CarveRun(a, launcher, st, &x_bf16, &bias));
  MG_RETURN_IF_ERROR(st->workspace.Allocate(launcher.workspace_bytes(*a)));
  // Upload: the input as the layer reads it; the bias as given.
  const size_t bh = static_cast<size_t>(a->geo.batch) * a->geo.hidden;
  MG_RETURN_IF_ERROR(UploadBf16Input(p.input.data(), bh, x_bf16, st->x_float));
  MG_CUDA(cudaMemcpy(bias, p.router_bias.data(), a->geo.experts * 4,
                     cudaMemcpyHostToDevice));
  MG_CUDA(cudaDeviceSynchronize());  // the zero fills ran on the legacy stream
  return OkStatus();
}

double MinBytes(const Geometry& g, int distinct) {
  return 2.0 * g.experts * g.hidden +
         (distinct + g.has_shared) * ExpertSliceBytes(g) +
         2.0 * 2.0 * g.batch * g.hidden;
}

double LayerWeightBytes(const Geometry& g) {
  return 2.0 * g.experts * g.hidden +
         (g.num_local + g.has_shared) * ExpertSliceBytes(g);
}

}  // namespace moetune::gpu
