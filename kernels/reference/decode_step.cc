#include "kernels/reference/decode_step.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/model/kv_fp8_format.h"
#include "kernels/model/nvfp4_format.h"
#include "kernels/model/weight_gen.h"
#include "kernels/reference/attention.h"
#include "kernels/reference/model_weights.h"
#include "kernels/reference/moe_reference.h"
#include "kernels/reference/ops.h"
#include "kernels/reference/step_bytes.h"

namespace moetune::ref {
namespace {

// y = down(SiLU(gate x) * (up x)) with the dense MLP of `layer` (NVFP4 or
// BF16, as the workload's map says): this rank's slice of the intermediate
// dim, so y is its partial sum.
void DenseMlp(const StepSpec& spec, int layer, const float* x, float* y) {
  const model::ModelConfig& c = spec.config;
  const int slice = DenseSlice(c, spec.shard);
  const int begin = DenseBegin(c, spec.shard);
  const WeightDesc gate_up = ProjectionDesc(spec, layer, weights::kDenseGateUp);
  std::vector<float> gate(static_cast<size_t>(slice));
  std::vector<float> up(static_cast<size_t>(slice));
  Gemv(gate_up, begin, slice, 0, c.hidden, x, gate.data());
  Gemv(gate_up, c.dense_intermediate + begin, slice, 0, c.hidden, x, up.data());
  for (int j = 0; j < slice; ++j) gate[j] = Silu(gate[j]) * up[j];
  Gemv(ProjectionDesc(spec, layer, weights::kDenseDown), 0, c.hidden, begin,
       slice, gate.data(), y);
}

absl::Status Mlp(const StepSpec& spec, int layer, const MoeFn& moe,
                 const std::vector<float>& normed, std::vector<float>& out) {
  const int hidden = spec.config.hidden;
  if (!model::IsMoeLayer(spec.config, layer)) {
    for (int b = 0; b < spec.batch; ++b) {
      DenseMlp(spec, layer, normed.data() + static_cast<size_t>(b) * hidden,
               out.data() + static_cast<size_t>(b) * hidden);
    }
    return absl::OkStatus();
  }
  if (!moe) {
    MoeLayerReference(spec, layer, normed.data(), spec.batch, out.data());
    return absl::OkStatus();
  }
  return moe(layer, normed.data(), spec.batch, out.data());
}

// Sequence b's kept set of `layer` in [layer][sequence] `sets`, or null
// where it has none (out of range or empty).
const std::vector<int>* KeptSetAt(
    const std::vector<std::vector<std::vector<int>>>& sets, int layer, int b) {
  if (layer >= static_cast<int>(sets.size()) ||
      b >= static_cast<int>(sets[layer].size()) || sets[layer][b].empty()) {
    return nullptr;
  }
  return &sets[layer][b];
}

// The attention block of every sequence, added to the residual stream h;
// with a trace, what its indexer chose (or the forced kept sets).
void AttentionBlock(const StepSpec& spec, int layer, int first_sequence,
                    std::vector<float>& h, StepTrace* trace) {
  const model::ModelConfig& c = spec.config;
  const std::vector<float> gamma =
      NormGamma(spec, layer, weights::kAttnNorm, c.hidden);
  std::vector<float> normed(static_cast<size_t>(c.hidden));
  std::vector<float> out(h.size());
  for (int b = 0; b < spec.batch; ++b) {
    const size_t row = static_cast<size_t>(b) * c.hidden;
    RmsNorm(h.data() + row, gamma.data(), c.hidden, c.rms_eps, normed.data());
    AttentionTrace seen;
    if (trace != nullptr) {
      seen.forced_kept = KeptSetAt(trace->forced_kept, layer, b);
      seen.proposed_kept = KeptSetAt(trace->proposed_kept, layer, b);
      seen.kept_tolerance = trace->kept_tolerance;
    }
    MlaAttention(spec, layer, first_sequence + b, normed.data(),
                 out.data() + row, &seen);
    if (trace != nullptr) {
      LayerTrace& t = trace->layers[layer];
      t.index_scores.push_back(std::move(seen.scores));
      t.kept.push_back(std::move(seen.kept));
      t.new_latent.push_back(std::move(seen.new_latent));
      t.new_key.push_back(std::move(seen.new_key));
    }
  }
  for (size_t i = 0; i < h.size(); ++i) h[i] += out[i];
}

// One decoder layer over the residual stream h [batch][hidden], in place.
absl::Status DecoderLayer(const StepSpec& spec, int layer, int first_sequence,
                          const MoeFn& moe, std::vector<float>& h,
                          StepTrace* trace) {
  const model::ModelConfig& c = spec.config;
  AttentionBlock(spec, layer, first_sequence, h, trace);
  const std::vector<float> ffn_gamma =
      NormGamma(spec, layer, weights::kFfnNorm, c.hidden);
  std::vector<float> normed(h.size());
  std::vector<float> out(h.size());
  for (int b = 0; b < spec.batch; ++b) {
    const size_t row = static_cast<size_t>(b) * c.hidden;
    RmsNorm(h.data() + row, ffn_gamma.data(), c.hidden, c.rms_eps,
            normed.data() + row);
  }
  RETURN_IF_ERROR(Mlp(spec, layer, moe, normed, out));
  for (size_t i = 0; i < h.size(); ++i) h[i] += out[i];
  if (trace != nullptr) {
    trace->layers[layer].mlp_out = std::move(out);
    trace->layers[layer].hidden = h;
  }
  return absl::OkStatus();
}

std::vector<float> Logits(const StepSpec& spec, std::vector<float>& h) {
  const model::ModelConfig& c = spec.config;
  const std::vector<float> gamma =
      NormGamma(spec, 0, weights::kFinalNorm, c.hidden);
  const WeightDesc lm_head = ProjectionDesc(spec, 0, weights::kLmHead);
  const int slice = VocabSlice(c, spec.shard);
  std::vector<float> logits(static_cast<size_t>(spec.batch) * slice);
  for (int b = 0; b < spec.batch; ++b) {
    float* row = h.data() + static_cast<size_t>(b) * c.hidden;
    RmsNorm(row, gamma.data(), c.hidden, c.rms_eps, row);
    Gemv(lm_head, VocabBegin(c, spec.shard), slice, 0, c.hidden, row,
         logits.data() + static_cast<size_t>(b) * slice);
  }
  return logits;
}

absl::StatusOr<std::vector<float>> Decode(const StepSpec& spec,
                                          int first_sequence, const MoeFn& moe,
                                          StepTrace* trace) {
  RETURN_IF_ERROR(ValidateStepSpec(spec));
  RETURN_IF_ERROR(ValidateStepShard(spec.config, spec.shard));
  RETURN_IF_ERROR(ValidateStepFormats(spec));
  if (first_sequence < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("first_sequence: must be >= 0, got ", first_sequence));
  }
  // Under data-parallel attention the rank decodes its own sequences only
  // (the MoE layers' other tokens change none of its outputs).
  StepSpec own = spec;
  own.batch = OwnBatch(spec.shard, spec.batch);
  first_sequence += FirstOwnSequence(spec.shard, spec.batch);
  const model::ModelConfig& c = own.config;
  const Bf16TensorDesc embedding = Bf16Desc(own, 0, weights::kEmbedding);
  std::vector<float> h(static_cast<size_t>(own.batch) * c.hidden);
  for (int b = 0; b < own.batch; ++b) {
    const int token = TokenId(own, first_sequence + b);
    for (int i = 0; i < c.hidden; ++i) {
      h[static_cast<size_t>(b) * c.hidden + i] = embedding.Weight(token, i);
    }
  }
  if (trace != nullptr) trace->layers.assign(own.layers, LayerTrace{});
  for (int layer = 0; layer < own.layers; ++layer) {
    RETURN_IF_ERROR(DecoderLayer(own, layer, first_sequence, moe, h, trace));
  }
  return Logits(own, h);
}

}  // namespace

MoeFn Bf16InputReferenceMoe(const StepSpec& spec) {
  return Bf16InputReferenceMoe(spec, nullptr, 0.0f);
}

MoeFn Bf16InputReferenceMoe(const StepSpec& spec,
                            const ProposedRoutes* proposed, float tolerance) {
  return [spec, proposed, tolerance](int layer, const float* x, int batch,
                                     float* y) {
    const size_t n = static_cast<size_t>(batch) * spec.config.hidden;
    std::vector<float> rounded(x, x + n);
    for (float& v : rounded) v = RoundToBf16(v);
    const size_t choices =
        static_cast<size_t>(batch) * spec.config.experts_per_token;
    if (proposed == nullptr || layer >= static_cast<int>(proposed->size()) ||
        (*proposed)[layer].empty()) {
      MoeLayerReference(spec, layer, rounded.data(), batch, y);
    } else if ((*proposed)[layer].size() != choices) {
      return absl::InvalidArgumentError(
          absl::StrCat("proposed routes of layer ", layer, ": ",
                       (*proposed)[layer].size(), " experts for ", batch,
                       " tokens of ", spec.config.experts_per_token));
    } else {
      MoeLayerReferenceNear(spec, layer, rounded.data(), batch,
                            (*proposed)[layer].data(), tolerance, y);
    }
    return absl::OkStatus();
  };
}

namespace {

// Decode from first_sequence attending to `kept` where near the indexer's
// own top k (StepTrace::proposed_kept).
absl::StatusOr<std::vector<float>> DecodeFollowingKept(const StepSpec& spec,
                                                       int first_sequence,
                                                       const MoeFn& moe,
                                                       ProposedKept kept,
                                                       float kept_tolerance) {
  StepTrace trace;
  trace.proposed_kept = std::move(kept);
  trace.kept_tolerance = kept_tolerance;
  return Decode(spec, first_sequence, moe, &trace);
}

}  // namespace

absl::StatusOr<std::vector<float>> DecodeStepFollowingKept(
    const StepSpec& spec, const MoeFn& moe, ProposedKept kept,
    float kept_tolerance) {
  return DecodeFollowingKept(spec, 0, moe, std::move(kept), kept_tolerance);
}

absl::StatusOr<std::vector<float>> DecodeSequencesFollowing(
    const StepSpec& spec, int first_sequence, ProposedChoices proposed) {
  // An empty proposal leaves every layer to the reference's own routing.
  return DecodeFollowingKept(
      spec, first_sequence,
      Bf16InputReferenceMoe(spec, &proposed.routes, kCarriedBf16RouteTolerance),
      std::move(proposed.kept), kCarriedBf16KeptTolerance);
}

absl::StatusOr<ProposedKept> LayerKeptSets(const StepSpec& spec,
                                           const std::vector<int>& kept,
                                           const std::vector<int>& counts) {
  const size_t rows = static_cast<size_t>(spec.layers) * spec.batch;
  const size_t k = spec.config.index_topk;
  if (kept.size() != rows * k || counts.size() != rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kept sets: ", kept.size(), " tokens and ", counts.size(), " counts; ",
        spec.layers, " layers of ", spec.batch, " sequences keeping up to ", k,
        " make ", rows * k, " and ", rows));
  }
  ProposedKept sets(spec.layers, std::vector<std::vector<int>>(spec.batch));
  for (size_t row = 0; row < rows; ++row) {
    const int n = counts[row];
    if (n < 0 || static_cast<size_t>(n) > k) {
      return absl::InvalidArgumentError(
          absl::StrCat("kept sets: layer ", row / spec.batch, " sequence ",
                       row % spec.batch, " counts ", n, " of at most ", k));
    }
    const auto first = kept.begin() + static_cast<ptrdiff_t>(row * k);
    sets[row / spec.batch][row % spec.batch].assign(first, first + n);
  }
  return sets;
}

absl::StatusOr<ProposedRoutes> MoeLayerRoutes(const StepSpec& spec,
                                              const std::vector<int>& flat) {
  const size_t per_layer =
      static_cast<size_t>(spec.batch) * spec.config.experts_per_token;
  size_t moe_layers = 0;
  for (int layer = 0; layer < spec.layers; ++layer) {
    moe_layers += model::IsMoeLayer(spec.config, layer) ? 1 : 0;
  }
  if (flat.size() != per_layer * moe_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("routes: ", flat.size(), " expert choices; ", moe_layers,
                     " MoE layers of ", spec.batch, " tokens choosing ",
                     spec.config.experts_per_token, " experts each make ",
                     per_layer * moe_layers));
  }
  ProposedRoutes routes(spec.layers);
  auto next = flat.begin();
  for (int layer = 0; layer < spec.layers; ++layer) {
    if (!model::IsMoeLayer(spec.config, layer)) continue;
    routes[layer].assign(next, next + static_cast<ptrdiff_t>(per_layer));
    next += static_cast<ptrdiff_t>(per_layer);
  }
  return routes;
}

absl::StatusOr<std::vector<float>> DecodeStep(const StepSpec& spec,
                                              const MoeFn& moe) {
  return DecodeSequences(spec, 0, moe);
}

absl::StatusOr<std::vector<float>> DecodeSequences(const StepSpec& spec,
                                                   int first_sequence,
                                                   const MoeFn& moe) {
  return Decode(spec, first_sequence, moe, nullptr);
}

absl::StatusOr<std::vector<float>> DecodeStepTraced(const StepSpec& spec,
                                                    StepTrace* trace) {
  return Decode(spec, 0, nullptr, trace);
}

namespace {

// The greedy next token of every sequence (the whole vocabulary's argmax,
// the lower id on a tie).
std::vector<int> NextTokens(const std::vector<float>& logits, int batch,
                            int vocab) {
  std::vector<int> next(static_cast<size_t>(batch));
  for (int b = 0; b < batch; ++b) {
    const float* row = logits.data() + static_cast<size_t>(b) * vocab;
    next[b] = static_cast<int>(std::max_element(row, row + vocab) - row);
  }
  return next;
}

// A new latent entry as the cache stores it (read back as float): BF16
// values, or the FP8 latent (kernels/model/kv_fp8_format.h) and BF16 rope.
std::vector<float> StoredLatent(const StepSpec& spec, std::vector<float> v) {
  const int kv_lora = spec.config.kv_lora_rank;
  for (size_t d = 0; d < v.size(); ++d) {
    const bool fp8 = spec.kv_cache == KvCacheDtype::kFp8E4M3 &&
                     d < static_cast<size_t>(kv_lora);
    if (!fp8) v[d] = RoundToBf16(v[d]);
  }
  if (spec.kv_cache == KvCacheDtype::kFp8E4M3) {
    kvfp8::RoundTripLatent(v.data(), kv_lora);
  }
  return v;
}

// Appends each sequence's new entries of every layer, in the caches'
// formats.
void AppendEntries(const StepSpec& spec, const StepTrace& trace, Generated* g) {
  for (size_t layer = 0; layer < trace.layers.size(); ++layer) {
    const LayerTrace& t = trace.layers[layer];
    for (size_t b = 0; b < t.new_latent.size(); ++b) {
      for (float v : StoredLatent(spec, t.new_latent[b])) {
        g->latent[layer][b].push_back(v);
      }
      for (float v : t.new_key[b]) {
        g->keys[layer][b].push_back(nvfp4::E4M3ToFloat(nvfp4::FloatToE4M3(v)));
      }
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<std::vector<float>>> DecodeSteps(
    const StepSpec& spec, int steps, const MoeFn& moe) {
  if (steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps: must be >= 1, got ", steps));
  }
  if (World(spec.shard) != 1) {
    return absl::InvalidArgumentError(
        "steps: several steps need the whole vocabulary's argmax: tp * ep "
        "must be 1");
  }
  Generated generated;
  generated.prefilled = spec.context;
  const auto per_sequence = std::vector<std::vector<float>>(spec.batch);
  generated.latent.assign(spec.layers, per_sequence);
  generated.keys.assign(spec.layers, per_sequence);
  StepSpec step = spec;
  step.generated = &generated;
  std::vector<std::vector<float>> logits;
  for (int s = 0; s < steps; ++s) {
    step.context = spec.context + s;
    StepTrace trace;
    ASSIGN_OR_RETURN(std::vector<float> out, Decode(step, 0, moe, &trace));
    AppendEntries(spec, trace, &generated);
    generated.tokens = NextTokens(out, spec.batch, spec.config.vocab);
    logits.push_back(std::move(out));
  }
  return logits;
}

int64_t DecodeStepBytes(const StepSpec& spec) {
  return DecodeStepByteBreakdown(spec, StandInDistinctExperts(spec)).Total();
}

}  // namespace moetune::ref
