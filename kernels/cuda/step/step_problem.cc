#include "kernels/cuda/step/step_problem.h"

#include <cmath>

#include "kernels/reference/model_weights.h"
#include "kernels/reference/moe_reference.h"
#include "kernels/reference/router.h"

namespace moetune::gpu {

StepDims StepDimsOf(const model::ModelConfig& c) {
  StepDims d;
  d.hidden = c.hidden;
  d.num_dense_layers = c.num_dense_layers;
  d.vocab = c.vocab;
  d.rms_eps = c.rms_eps;
  d.latent_eps = c.latent_norm_eps;
  d.index_eps = c.index_norm_eps;
  d.q_lora = c.q_lora_rank;
  d.heads = c.num_heads;
  d.nope = c.qk_nope_dim;
  d.rope = c.qk_rope_dim;
  d.kv_lora = c.kv_lora_rank;
  d.v_dim = c.v_head_dim;
  d.index_heads = c.index_heads;
  d.index_dim = c.index_head_dim;
  d.index_topk = c.index_topk;
  d.dense_inter = c.dense_intermediate;
  d.moe = {c.hidden,
           c.moe_intermediate,
           c.num_experts,
           c.experts_per_token,
           c.num_shared_experts,
           c.routed_scaling};
  return d;
}

StepFormats StepFormatsOf(const ref::StepSpec& s) {
  StepFormats f;
  f.attention_nvfp4 = s.quantization.attention == ref::Precision::kNvfp4;
  f.dense_bf16 = s.quantization.dense_mlp == ref::Precision::kBf16;
  f.lm_head_nvfp4 = s.quantization.lm_head == ref::Precision::kNvfp4;
  f.kv_fp8 = s.kv_cache == ref::KvCacheDtype::kFp8E4M3;
  return f;
}

StepProblem MakeStepProblem(const ref::StepSpec& s) {
  StepProblem p;
  p.dims = StepDimsOf(s.config);
  p.formats = StepFormatsOf(s);
  p.seed = s.seed;
  p.layers = s.layers;
  p.batch = ref::OwnBatch(s.shard, s.batch);
  p.first_sequence = ref::FirstOwnSequence(s.shard, s.batch);
  p.context = s.context;
  p.shard = {s.shard.tp, s.shard.ep, s.shard.rank};
  p.dp_attention = s.shard.dp_attention;
  for (int b = 0; b < p.batch; ++b) {
    p.tokens.push_back(ref::TokenId(s, p.first_sequence + b));
  }
  if (p.dp_attention && ref::World(s.shard) > 1 &&
      s.layers > s.config.num_dense_layers) {
    // The other ranks' MoE inputs without a gang: the MoE layer region's
    // synthetic input of the whole batch (the first MoE layer's, for every
    // layer: each layer's router still sends it its own way), BF16 values.
    p.peer_moe_input = ref::MoeLayerInput(s, s.config.num_dense_layers);
  }
  for (int layer = s.config.num_dense_layers; layer < s.layers; ++layer) {
    p.router_bias.push_back(ref::RouterBias(s, layer));
  }
  const int dim = s.config.qk_rope_dim;
  for (int i = 0; i < dim / 2; ++i) {
    const double inv_freq =
        std::pow(static_cast<double>(s.config.rope_theta), -2.0 * i / dim);
    const double angle = s.context * inv_freq;
    p.rope_cos.push_back(std::cos(angle));
    p.rope_sin.push_back(std::sin(angle));
  }
  return p;
}

}  // namespace moetune::gpu
