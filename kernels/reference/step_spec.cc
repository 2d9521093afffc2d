#include "kernels/reference/step_spec.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace moetune::ref {

absl::Status ValidateShard(const model::ModelConfig& config,
                           const Shard& shard) {
  if (shard.tp < 1 || shard.ep < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard.tp / shard.ep: must be >= 1, got ", shard.tp, " / ", shard.ep));
  }
  if (shard.rank < 0 || shard.rank >= shard.tp * shard.ep) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard.rank: must be in [0, tp*ep) = [0, ",
                     shard.tp * shard.ep, "), got ", shard.rank));
  }
  if (config.num_experts % shard.ep != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard.ep: must divide num_experts (", config.num_experts,
                     "), got ", shard.ep));
  }
  // Each TP slice is the K range of the down projection, so it must hold
  // whole NVFP4 blocks.
  if (config.moe_intermediate % (16 * shard.tp) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard.tp: moe_intermediate (", config.moe_intermediate,
                     ") / tp must be a multiple of 16, got tp ", shard.tp));
  }
  return absl::OkStatus();
}

absl::Status ValidateStepShard(const model::ModelConfig& config,
                               const Shard& shard) {
  RETURN_IF_ERROR(ValidateShard(config, shard));
  const int world = SplitWorld(shard);
  if (config.num_heads % world != 0 || config.vocab % world != 0 ||
      config.dense_intermediate % (16 * world) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard.tp * shard.ep: the decode step splits attention heads (",
        config.num_heads, "), the vocabulary (", config.vocab,
        ") and the dense MLP (", config.dense_intermediate,
        ", in blocks of 16) over the world; ", world, " does not divide them"));
  }
  return absl::OkStatus();
}

absl::Status ValidateStepFormats(const StepSpec& spec) {
  if (spec.quantization.attention != Precision::kNvfp4) {
    return absl::OkStatus();
  }
  const model::ModelConfig& c = spec.config;
  const int o_columns = HeadsPerRank(c, spec.shard) * c.v_head_dim;
  for (int k : {c.hidden, c.q_lora_rank, c.kv_lora_rank, o_columns}) {
    if (k % 16 == 0) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "quantization.attention: NVFP4 needs reductions of whole 16-value "
        "blocks; hidden, q_lora_rank, kv_lora_rank and this rank's o_proj "
        "columns are ",
        c.hidden, ", ", c.q_lora_rank, ", ", c.kv_lora_rank, ", ", o_columns,
        "; allowed here: BF16"));
  }
  return absl::OkStatus();
}

absl::Status ValidateRouting(const model::ModelConfig& config,
                             const RoutingSpec& routing) {
  using Kind = RoutingSpec::Kind;
  if (routing.kind == Kind::kSkewed &&
      !(std::isfinite(routing.skew) && routing.skew >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "routing.skew: must be finite and >= 0, got ", routing.skew));
  }
  if (routing.kind != Kind::kReplayed) return absl::OkStatus();
  if (static_cast<int>(routing.histogram.size()) != config.num_experts) {
    return absl::InvalidArgumentError(
        absl::StrCat("routing.histogram: needs one count per expert (",
                     config.num_experts, "), got ", routing.histogram.size()));
  }
  double max_count = 0;
  for (double count : routing.histogram) {
    if (!(std::isfinite(count) && count >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "routing.histogram: counts must be finite and >= 0, got ", count));
    }
    max_count = std::max(max_count, count);
  }
  if (max_count <= 0) {
    return absl::InvalidArgumentError(
        "routing.histogram: at least one count must be > 0");
  }
  return absl::OkStatus();
}

absl::Status ValidateStepSpec(const StepSpec& spec) {
  RETURN_IF_ERROR(model::ValidateModelConfig(spec.config));
  if (spec.layers < 1 || spec.layers > spec.config.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("step.layers: must be in [1, ", spec.config.num_layers,
                     "], got ", spec.layers));
  }
  if (spec.batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("step.batch: must be >= 1, got ", spec.batch));
  }
  if (spec.context < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step.context: must be >= 0, got ", spec.context));
  }
  RETURN_IF_ERROR(ValidateRouting(spec.config, spec.routing));
  RETURN_IF_ERROR(ValidateShard(spec.config, spec.shard));
  const int world = World(spec.shard);
  if (spec.shard.dp_attention && spec.batch % world != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step.batch: data-parallel attention gives each of the tp * ep = ",
        world, " ranks batch / ", world, " sequences; ", spec.batch,
        " is not a multiple of ", world));
  }
  return absl::OkStatus();
}

}  // namespace moetune::ref
