// moetune-golden-export: writes what another implementation of GLM-5 needs
// to run the reference's decode step on exactly the reference's numbers, for
// tests/golden/hf_golden.py (Hugging Face transformers' GlmMoeDsa):
//   OUT/manifest.json       the cases (tiny preset, seed, batch, context,
//                           routing) and the model's dims
//   OUT/case_N.safetensors  every weight under its Hugging Face name
//                           (float32; NVFP4 tensors dequantised as the
//                           reference does), the synthetic caches (latent,
//                           rope key, indexer key per layer, [B, T, dim]),
//                           the token ids, and the reference's own logits
//                           (for a first look on the GPU machine).
// The caches' rotated parts are in the reference's layout (interleaved in
// place); the script de-interleaves them for Hugging Face's cache.
//
//   moetune-golden-export --out DIR
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/model/weight_gen.h"
#include "kernels/reference/decode_step.h"
#include "kernels/reference/model_weights.h"
#include "kernels/reference/router.h"
#include "tests/golden/golden_cases.h"

namespace moetune::golden {
namespace {

// A tensor to write: float32 or int64, row-major.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<int64_t> i64;
};

using Tensors = std::map<std::string, Tensor>;

// The safetensors format: an 8-byte little-endian header length, a JSON
// header (names, dtypes, shapes, byte ranges), then the raw data.
bool WriteSafetensors(const std::string& path, const Tensors& tensors) {
  std::string header = "{";
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const size_t bytes = t.f32.empty() ? t.i64.size() * 8 : t.f32.size() * 4;
    absl::StrAppend(&header, header.size() > 1 ? "," : "", "\"", name,
                    "\":{\"dtype\":\"", t.f32.empty() ? "I64" : "F32",
                    "\",\"shape\":[", absl::StrJoin(t.shape, ","),
                    "],\"data_offsets\":[", offset, ",", offset + bytes, "]}");
    offset += bytes;
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  std::ofstream out(path, std::ios::binary);
  const uint64_t length = header.size();
  out.write(reinterpret_cast<const char*>(&length), 8);
  out << header;
  for (const auto& [name, t] : tensors) {
    if (t.f32.empty()) {
      out.write(reinterpret_cast<const char*>(t.i64.data()), t.i64.size() * 8);
    } else {
      out.write(reinterpret_cast<const char*>(t.f32.data()), t.f32.size() * 4);
    }
  }
  return out.good();
}

Tensor FromBf16(const ref::Bf16TensorDesc& d, int64_t row_begin = 0,
                int64_t rows = -1) {
  if (rows < 0) rows = d.rows;
  Tensor t{{rows, d.k}, {}, {}};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < d.k; ++c)
      t.f32.push_back(d.Weight(row_begin + r, c));
  }
  return t;
}

// Rows [row_begin, row_begin + rows) of an NVFP4 tensor, dequantised.
Tensor FromNvfp4(const ref::Nvfp4TensorDesc& d, int64_t row_begin,
                 int64_t rows) {
  Tensor t{{rows, d.k}, std::vector<float>(rows * d.k), {}};
  for (int64_t r = 0; r < rows; ++r) {
    d.DequantRow(row_begin + r, t.f32.data() + r * d.k);
  }
  return t;
}

Tensor Vector(const std::vector<float>& v) {
  return {{static_cast<int64_t>(v.size())}, v, {}};
}

void AddAttention(const ref::StepSpec& spec, int l, const std::string& p,
                  Tensors& out) {
  const model::ModelConfig& c = spec.config;
  using namespace weights;  // NOLINT: the tensor ids
  out[p + "input_layernorm.weight"] =
      Vector(ref::NormGamma(spec, l, kAttnNorm, c.hidden));
  out[p + "post_attention_layernorm.weight"] =
      Vector(ref::NormGamma(spec, l, kFfnNorm, c.hidden));
  const std::string a = p + "self_attn.";
  out[a + "q_a_proj.weight"] = FromBf16(ref::Bf16Desc(spec, l, kQA));
  out[a + "q_a_layernorm.weight"] =
      Vector(ref::NormGamma(spec, l, kQANorm, c.q_lora_rank));
  out[a + "q_b_proj.weight"] = FromBf16(ref::Bf16Desc(spec, l, kQB));
  out[a + "kv_a_proj_with_mqa.weight"] = FromBf16(ref::Bf16Desc(spec, l, kKVA));
  out[a + "kv_a_layernorm.weight"] =
      Vector(ref::NormGamma(spec, l, kKVANorm, c.kv_lora_rank));
  out[a + "kv_b_proj.weight"] = FromBf16(ref::Bf16Desc(spec, l, kKVB));
  out[a + "o_proj.weight"] = FromBf16(ref::Bf16Desc(spec, l, kO));
  const std::string i = a + "indexer.";
  out[i + "wq_b.weight"] = FromBf16(ref::Bf16Desc(spec, l, kIndexerQB));
  out[i + "wk.weight"] = FromBf16(ref::Bf16Desc(spec, l, kIndexerK));
  out[i + "k_norm.weight"] =
      Vector(ref::NormGamma(spec, l, kIndexerKNorm, c.index_head_dim));
  out[i + "k_norm.bias"] =
      Vector(ref::NormBias(spec, l, kIndexerKNormBias, c.index_head_dim));
  out[i + "weights_proj.weight"] =
      FromBf16(ref::Bf16Desc(spec, l, kIndexerWeights));
}

// A gate_up tensor [2 * inter, hidden] as the gate and up projections.
void AddGateUpDown(const ref::Nvfp4TensorDesc& gate_up,
                   const ref::Nvfp4TensorDesc& down, const std::string& p,
                   Tensors& out) {
  const int64_t inter = gate_up.rows / 2;
  out[p + "gate_proj.weight"] = FromNvfp4(gate_up, 0, inter);
  out[p + "up_proj.weight"] = FromNvfp4(gate_up, inter, inter);
  out[p + "down_proj.weight"] = FromNvfp4(down, 0, down.rows);
}

// The routed experts as Hugging Face stores them: gate_up_proj [E, 2 *
// inter, hidden] (gate rows first) and down_proj [E, hidden, inter].
void AddExperts(const ref::StepSpec& spec, int l, const std::string& p,
                Tensors& out) {
  const model::ModelConfig& c = spec.config;
  Tensor gate_up{{c.num_experts, 2 * c.moe_intermediate, c.hidden}, {}, {}};
  Tensor down{{c.num_experts, c.hidden, c.moe_intermediate}, {}, {}};
  for (int e = 0; e < c.num_experts; ++e) {
    const Tensor gu =
        FromNvfp4(ref::ExpertGateUpDesc(spec, l, e), 0, 2 * c.moe_intermediate);
    const Tensor d = FromNvfp4(ref::ExpertDownDesc(spec, l, e), 0, c.hidden);
    gate_up.f32.insert(gate_up.f32.end(), gu.f32.begin(), gu.f32.end());
    down.f32.insert(down.f32.end(), d.f32.begin(), d.f32.end());
  }
  out[p + "experts.gate_up_proj"] = std::move(gate_up);
  out[p + "experts.down_proj"] = std::move(down);
}

void AddMlp(const ref::StepSpec& spec, int l, const std::string& p,
            Tensors& out) {
  const std::string m = p + "mlp.";
  if (!model::IsMoeLayer(spec.config, l)) {
    AddGateUpDown(ref::DenseGateUpDesc(spec, l), ref::DenseDownDesc(spec, l), m,
                  out);
    return;
  }
  out[m + "gate.weight"] = FromBf16(ref::Bf16Desc(spec, l, weights::kRouter));
  out[m + "gate.e_score_correction_bias"] = Vector(ref::RouterBias(spec, l));
  AddExperts(spec, l, m, out);
  AddGateUpDown(ref::SharedGateUpDesc(spec, l), ref::SharedDownDesc(spec, l),
                m + "shared_experts.", out);
}

// Per layer, the caches of every sequence: [B, T, dim] each.
void AddCaches(const ref::StepSpec& spec, int l, Tensors& out) {
  const model::ModelConfig& c = spec.config;
  const int64_t b = spec.batch, t = spec.context;
  Tensor latent{{b, t, c.kv_lora_rank}, {}, {}};
  Tensor rope{{b, t, c.qk_rope_dim}, {}, {}};
  Tensor index{{b, t, c.index_head_dim}, {}, {}};
  std::vector<float> entry(c.kv_lora_rank + c.qk_rope_dim);
  std::vector<float> key(c.index_head_dim);
  for (int s = 0; s < spec.batch; ++s) {
    for (int i = 0; i < spec.context; ++i) {
      ref::LatentCacheEntry(spec, l, s, i, entry.data());
      latent.f32.insert(latent.f32.end(), entry.begin(),
                        entry.begin() + c.kv_lora_rank);
      rope.f32.insert(rope.f32.end(), entry.begin() + c.kv_lora_rank,
                      entry.end());
      ref::IndexerKeyCacheEntry(spec, l, s, i, key.data());
      index.f32.insert(index.f32.end(), key.begin(), key.end());
    }
  }
  const std::string n = absl::StrCat(l);
  out["cache.latent." + n] = std::move(latent);
  out["cache.rope." + n] = std::move(rope);
  out["cache.index." + n] = std::move(index);
}

bool ExportCase(const GoldenCase& gc, const std::string& path) {
  const ref::StepSpec spec = gc.Spec();
  Tensors out;
  out["model.embed_tokens.weight"] =
      FromBf16(ref::Bf16Desc(spec, 0, weights::kEmbedding));
  out["lm_head.weight"] = FromBf16(ref::Bf16Desc(spec, 0, weights::kLmHead));
  out["model.norm.weight"] =
      Vector(ref::NormGamma(spec, 0, weights::kFinalNorm, spec.config.hidden));
  for (int l = 0; l < spec.layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    AddAttention(spec, l, p, out);
    AddMlp(spec, l, p, out);
    AddCaches(spec, l, out);
  }
  Tensor ids{{spec.batch}, {}, {}};
  for (int s = 0; s < spec.batch; ++s) ids.i64.push_back(ref::TokenId(spec, s));
  out["input_ids"] = std::move(ids);
  absl::StatusOr<std::vector<float>> logits = ref::DecodeStep(spec, nullptr);
  if (!logits.ok()) return false;
  out["ref.logits"] = {{spec.batch, spec.config.vocab}, *logits, {}};
  return WriteSafetensors(path, out);
}

// The dims hf_golden.py builds GlmMoeDsaConfig from.
std::string ConfigJson(const model::ModelConfig& c) {
  return absl::StrCat(
      "{\"vocab_size\":", c.vocab, ",\"hidden_size\":", c.hidden,
      ",\"intermediate_size\":", c.dense_intermediate,
      ",\"moe_intermediate_size\":", c.moe_intermediate,
      ",\"num_hidden_layers\":", c.num_layers,
      ",\"num_attention_heads\":", c.num_heads,
      ",\"num_key_value_heads\":", c.num_heads,
      ",\"n_shared_experts\":", c.num_shared_experts,
      ",\"n_routed_experts\":", c.num_experts,
      ",\"routed_scaling_factor\":", c.routed_scaling,
      ",\"kv_lora_rank\":", c.kv_lora_rank, ",\"q_lora_rank\":", c.q_lora_rank,
      ",\"qk_rope_head_dim\":", c.qk_rope_dim, ",\"v_head_dim\":", c.v_head_dim,
      ",\"qk_nope_head_dim\":", c.qk_nope_dim,
      ",\"num_experts_per_tok\":", c.experts_per_token,
      ",\"first_k_dense_replace\":", c.num_dense_layers,
      ",\"rms_norm_eps\":", c.rms_eps, ",\"rope_theta\":", c.rope_theta,
      ",\"index_topk\":", c.index_topk,
      ",\"index_head_dim\":", c.index_head_dim,
      ",\"index_n_heads\":", c.index_heads, "}");
}

int Main(int argc, char** argv) {
  std::string out_dir;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--out=", 6) == 0) out_dir = argv[i] + 6;
  }
  if (out_dir.empty()) {
    std::fprintf(stderr, "usage: moetune-golden-export --out=DIR\n");
    return 2;
  }
  std::string cases = "[";
  const std::vector<GoldenCase> all = GoldenCases();
  for (size_t n = 0; n < all.size(); ++n) {
    const std::string file = absl::StrCat("case_", n, ".safetensors");
    if (!ExportCase(all[n], out_dir + "/" + file)) {
      std::fprintf(stderr, "could not export case %zu to %s\n", n,
                   out_dir.c_str());
      return 1;
    }
    absl::StrAppend(&cases, n > 0 ? "," : "", "{\"file\":\"", file,
                    "\",\"case\":", all[n].Json(), "}");
  }
  std::ofstream manifest(out_dir + "/manifest.json");
  manifest << "{\"config\":" << ConfigJson(all.front().Spec().config)
           << ",\"cases\":" << cases << "]}\n";
  std::printf("exported %zu cases to %s\n", all.size(), out_dir.c_str());
  return manifest.good() ? 0 : 1;
}

}  // namespace
}  // namespace moetune::golden

int main(int argc, char** argv) { return moetune::golden::Main(argc, argv); }
