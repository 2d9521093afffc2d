#include "kernels/reference/moe_reference.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/model/nvfp4_format.h"
#include "kernels/model/weight_gen.h"
#include "kernels/reference/model_weights.h"
#include "kernels/reference/ops.h"
#include "kernels/reference/router.h"

namespace moetune::ref {
namespace {

struct RoutedToken {
  int token;
  float weight;
};

// act[t][j] = SiLU(gate_j . x_t) * (up_j . x_t) over this rank's slice j.
std::vector<float> GateUpSlice(const StepSpec& spec,
                               const Nvfp4TensorDesc& gate_up, const float* x,
                               const std::vector<RoutedToken>& tokens) {
  const model::ModelConfig& c = spec.config;
  const int slice = InterSlice(c, spec.shard);
  const int begin = InterBegin(c, spec.shard);
  std::vector<float> gate_row(static_cast<size_t>(c.hidden));
  std::vector<float> up_row(static_cast<size_t>(c.hidden));
  std::vector<float> act(tokens.size() * slice);
  for (int j = 0; j < slice; ++j) {
    gate_up.DequantRow(begin + j, gate_row.data());
    gate_up.DequantRow(c.moe_intermediate + begin + j, up_row.data());
    for (size_t t = 0; t < tokens.size(); ++t) {
      const float* xt = x + static_cast<size_t>(tokens[t].token) * c.hidden;
      const auto gate = static_cast<float>(Dot(gate_row.data(), xt, c.hidden));
      const auto up = static_cast<float>(Dot(up_row.data(), xt, c.hidden));
      act[t * slice + j] = Silu(gate) * up;
    }
  }
  return act;
}

// acc[token] += weight * down_slice(act[t]) for every routed token.
void DownSliceAccumulate(const StepSpec& spec, const Nvfp4TensorDesc& down,
                         const std::vector<float>& act,
                         const std::vector<RoutedToken>& tokens, double* acc) {
  const model::ModelConfig& c = spec.config;
  const int slice = InterSlice(c, spec.shard);
  const int begin = InterBegin(c, spec.shard);
  std::vector<float> down_row(static_cast<size_t>(slice));
  for (int r = 0; r < c.hidden; ++r) {
    down.DequantRange(r, begin, slice, down_row.data());
    for (size_t t = 0; t < tokens.size(); ++t) {
      const double value = Dot(down_row.data(), act.data() + t * slice, slice);
      acc[static_cast<size_t>(tokens[t].token) * c.hidden + r] +=
          static_cast<double>(tokens[t].weight) * value;
    }
  }
}

void ExpertAccumulate(const StepSpec& spec, const Nvfp4TensorDesc& gate_up,
                      const Nvfp4TensorDesc& down, const float* x,
                      const std::vector<RoutedToken>& tokens, double* acc) {
  if (tokens.empty()) return;
  const std::vector<float> act = GateUpSlice(spec, gate_up, x, tokens);
  DownSliceAccumulate(spec, down, act, tokens, acc);
}

}  // namespace

absl::Status ValidateMoeCall(const StepSpec& spec, int layer, int batch) {
  const model::ModelConfig& c = spec.config;
  if (layer < c.num_dense_layers || layer >= c.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer: MoE layers of ", c.name, " are [",
                     c.num_dense_layers, ", ", c.num_layers, "), got ", layer));
  }
  if (batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch: must be >= 1, got ", batch));
  }
  return absl::OkStatus();
}

namespace {

// The layer for tokens routed by `routes` [batch].
void MoeWithRoutes(const StepSpec& spec, int layer, const float* x, int batch,
                   const std::vector<Route>& routes, float* y) {
  const model::ModelConfig& c = spec.config;
  std::vector<double> acc(static_cast<size_t>(batch) * c.hidden, 0.0);
  for (int e = 0; e < c.num_experts; ++e) {
    if (!OwnsExpert(c, spec.shard, e)) continue;
    std::vector<RoutedToken> tokens;
    for (int b = 0; b < batch; ++b) {
      for (size_t k = 0; k < routes[b].experts.size(); ++k) {
        if (routes[b].experts[k] == e)
          tokens.push_back({b, routes[b].weights[k]});
      }
    }
    ExpertAccumulate(spec, ExpertGateUpDesc(spec, layer, e),
                     ExpertDownDesc(spec, layer, e), x, tokens, acc.data());
  }
  if (OwnsShared(c, spec.shard)) {
    std::vector<RoutedToken> all;
    for (int b = 0; b < batch; ++b) all.push_back({b, 1.0f});
    ExpertAccumulate(spec, SharedGateUpDesc(spec, layer),
                     SharedDownDesc(spec, layer), x, all, acc.data());
  }
  for (size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<float>(acc[i]);
}

}  // namespace

void MoeLayerReference(const StepSpec& spec, int layer, const float* x,
                       int batch, float* y) {
  MoeWithRoutes(spec, layer, x, batch, RouteBatch(spec, layer, x, batch), y);
}

void MoeLayerReferenceNear(const StepSpec& spec, int layer, const float* x,
                           int batch, const int* proposed, float tolerance,
                           float* y) {
  MoeWithRoutes(spec, layer, x, batch,
                RouteBatchNear(spec, layer, x, batch, proposed, tolerance), y);
}

std::vector<float> MoeLayerInput(const StepSpec& spec, int layer) {
  const int hidden = spec.config.hidden;
  const std::vector<float> gamma =
      NormGamma(spec, layer, weights::kFfnNorm, hidden);
  std::vector<float> x(static_cast<size_t>(spec.batch) * hidden);
  for (int b = 0; b < spec.batch; ++b) {
    float* row = x.data() + static_cast<size_t>(b) * hidden;
    for (int c = 0; c < hidden; ++c) {
      // Index space above the token ids' (which use index = sequence).
      const uint64_t index =
          (uint64_t{1} << 32) + static_cast<uint64_t>(b) * hidden + c;
      row[c] = weights::UnitUniform(weights::Hash(
          spec.seed, static_cast<uint32_t>(layer), weights::kInput, index));
    }
    RmsNorm(row, gamma.data(), hidden, spec.config.rms_eps, row);
    for (int c = 0; c < hidden; ++c) row[c] = RoundToBf16(row[c]);
  }
  return x;
}

int64_t ExpertSliceBytes(const model::ModelConfig& config, const Shard& shard) {
  const int64_t slice = InterSlice(config, shard);
  const int64_t hidden = config.hidden;
  return nvfp4::CodeBytes(2 * slice, hidden) +
         nvfp4::ScaleBytes(2 * slice, hidden) +
         nvfp4::CodeBytes(hidden, slice) + nvfp4::ScaleBytes(hidden, slice);
}

int64_t MoeLayerBytes(const StepSpec& spec, int layer, const float* x,
                      int batch) {
  const model::ModelConfig& c = spec.config;
  int64_t bytes = int64_t{c.num_experts} * c.hidden * 2;  // BF16 router
  std::set<int> owned;
  for (const Route& route : RouteBatch(spec, layer, x, batch)) {
    for (int e : route.experts) {
      if (OwnsExpert(c, spec.shard, e)) owned.insert(e);
    }
  }
  const int64_t experts =
      static_cast<int64_t>(owned.size()) + (OwnsShared(c, spec.shard) ? 1 : 0);
  bytes += experts * ExpertSliceBytes(c, spec.shard);
  bytes += 2 * int64_t{batch} * c.hidden * 2;  // BF16 input and output
  return bytes;
}

}  // namespace moetune::ref
