// The C ABI of kernels/c_api/moetune_model.h over the reference's own
// generators (model_weights, moe_reference, router), so that a plugin's
// inputs are bit for bit a native backend's.
#include "kernels/c_api/moetune_model.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/model/model_config.h"
#include "kernels/reference/model_weights.h"
#include "kernels/reference/moe_reference.h"
#include "kernels/reference/router.h"
#include "kernels/reference/step_spec.h"
#include "kernels/reference/tensors.h"

// The opaque handle: the resolved spec, and the layer's input and routes
// made once.
struct moetune_moe {
  moetune::ref::StepSpec step;
  int layer = 0;
  std::vector<float> x;
  std::vector<moetune::ref::Route> routes;
};

namespace moetune::c_api {
namespace {

absl::StatusOr<ref::RoutingSpec> RoutingOf(const moetune_moe_spec& spec) {
  ref::RoutingSpec routing;
  switch (spec.routing) {
    case MOETUNE_ROUTING_UNIFORM:
      routing.kind = ref::RoutingSpec::Kind::kUniform;
      return routing;
    case MOETUNE_ROUTING_SKEWED:
      routing.kind = ref::RoutingSpec::Kind::kSkewed;
      routing.skew = spec.skew;
      return routing;
    case MOETUNE_ROUTING_REPLAYED:
      routing.kind = ref::RoutingSpec::Kind::kReplayed;
      if (spec.histogram != nullptr && spec.histogram_len > 0) {
        routing.histogram.assign(spec.histogram,
                                 spec.histogram + spec.histogram_len);
      }
      return routing;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "routing: ", spec.routing,
          " is not allowed; allowed: 0 (uniform), 1 (skewed), 2 (replayed)"));
  }
}

absl::StatusOr<ref::StepSpec> StepOf(const moetune_moe_spec& spec) {
  if (spec.preset == nullptr) {
    return absl::InvalidArgumentError("preset: must not be null");
  }
  ref::StepSpec step;
  ASSIGN_OR_RETURN(step.config, model::PresetByName(spec.preset));
  step.layers = step.config.num_layers;
  step.batch = spec.batch;
  step.seed = spec.seed;
  ASSIGN_OR_RETURN(step.routing, RoutingOf(spec));
  step.shard.tp = spec.tp;
  step.shard.ep = spec.ep;
  step.shard.rank = spec.rank;
  RETURN_IF_ERROR(ref::ValidateStepSpec(step));
  return step;
}

absl::StatusOr<std::unique_ptr<moetune_moe>> Create(
    const moetune_moe_spec& spec) {
  auto moe = std::make_unique<moetune_moe>();
  ASSIGN_OR_RETURN(moe->step, StepOf(spec));
  moe->layer = spec.layer < 0 ? moe->step.config.num_dense_layers : spec.layer;
  RETURN_IF_ERROR(ref::ValidateMoeCall(moe->step, moe->layer, spec.batch));
  moe->x = ref::MoeLayerInput(moe->step, moe->layer);
  moe->routes =
      ref::RouteBatch(moe->step, moe->layer, moe->x.data(), spec.batch);
  return moe;
}

void WriteError(const std::string& message, char* error, size_t bytes) {
  if (error == nullptr || bytes == 0) return;
  const size_t n = std::min(message.size(), bytes - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

// Copies a packed tensor's bytes into the caller's buffers.
void CopyPacked(const ref::PackedNvfp4& packed, uint8_t* codes,
                uint8_t* scales) {
  std::copy(packed.codes.begin(), packed.codes.end(), codes);
  std::copy(packed.scales.begin(), packed.scales.end(), scales);
}

// Gate rows then up rows of this rank's slice, as one [2 * slice, hidden]
// tensor (both halves of the same tensor share its scale).
void FillGateUp(const moetune_moe& moe, const ref::Nvfp4TensorDesc& gate_up,
                uint8_t* codes, uint8_t* scales, float* tensor_scale) {
  const model::ModelConfig& c = moe.step.config;
  const int slice = ref::InterSlice(c, moe.step.shard);
  const int begin = ref::InterBegin(c, moe.step.shard);
  const ref::PackedNvfp4 gate =
      ref::MaterializeSlice(gate_up, begin, slice, 0, c.hidden);
  const ref::PackedNvfp4 up = ref::MaterializeSlice(
      gate_up, c.moe_intermediate + begin, slice, 0, c.hidden);
  CopyPacked(gate, codes, scales);
  CopyPacked(up, codes + gate.codes.size(), scales + gate.scales.size());
  *tensor_scale = gate_up.tensor_scale;
}

void FillDown(const moetune_moe& moe, const ref::Nvfp4TensorDesc& down,
              uint8_t* codes, uint8_t* scales, float* tensor_scale) {
  const model::ModelConfig& c = moe.step.config;
  const ref::PackedNvfp4 packed = ref::MaterializeSlice(
      down, 0, c.hidden, ref::InterBegin(c, moe.step.shard),
      ref::InterSlice(c, moe.step.shard));
  CopyPacked(packed, codes, scales);
  *tensor_scale = down.tensor_scale;
}

}  // namespace
}  // namespace moetune::c_api

extern "C" {

int32_t moetune_model_abi_version(void) { return MOETUNE_MODEL_ABI_VERSION; }

moetune_moe* moetune_moe_create(const moetune_moe_spec* spec, char* error,
                                size_t error_bytes) {
  if (spec == nullptr) {
    moetune::c_api::WriteError("spec: must not be null", error, error_bytes);
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<moetune_moe>> moe =
      moetune::c_api::Create(*spec);
  if (!moe.ok()) {
    moetune::c_api::WriteError(std::string(moe.status().message()), error,
                               error_bytes);
    return nullptr;
  }
  return moe->release();
}

void moetune_moe_free(moetune_moe* moe) { delete moe; }

int32_t moetune_moe_get_dims(const moetune_moe* moe, moetune_moe_dims* out) {
  if (moe == nullptr || out == nullptr) return -1;
  const moetune::model::ModelConfig& c = moe->step.config;
  out->batch = moe->step.batch;
  out->hidden = c.hidden;
  out->inter_slice = moetune::ref::InterSlice(c, moe->step.shard);
  out->num_experts = c.num_experts;
  out->top_k = c.experts_per_token;
  out->block_size = 16;
  out->layer = moe->layer;
  out->has_shared = moetune::ref::OwnsShared(c, moe->step.shard) ? 1 : 0;
  return 0;
}

int32_t moetune_moe_fill_activations(const moetune_moe* moe, float* x) {
  if (moe == nullptr || x == nullptr) return -1;
  std::copy(moe->x.begin(), moe->x.end(), x);
  return 0;
}

int32_t moetune_moe_fill_routing(const moetune_moe* moe, int32_t* experts,
                                 float* weights) {
  if (moe == nullptr || experts == nullptr || weights == nullptr) return -1;
  const size_t top_k = moe->step.config.experts_per_token;
  for (size_t b = 0; b < moe->routes.size(); ++b) {
    const moetune::ref::Route& route = moe->routes[b];
    std::copy(route.experts.begin(), route.experts.end(), experts + b * top_k);
    std::copy(route.weights.begin(), route.weights.end(), weights + b * top_k);
  }
  return 0;
}

int32_t moetune_moe_expert_owned(const moetune_moe* moe, int32_t expert) {
  if (moe == nullptr || expert < 0 || expert >= moe->step.config.num_experts) {
    return -1;
  }
  return moetune::ref::OwnsExpert(moe->step.config, moe->step.shard, expert)
             ? 1
             : 0;
}

int32_t moetune_moe_fill_expert(const moetune_moe* moe, int32_t expert,
                                uint8_t* gate_up_codes, uint8_t* gate_up_scales,
                                float* gate_up_tensor_scale,
                                uint8_t* down_codes, uint8_t* down_scales,
                                float* down_tensor_scale) {
  using moetune::ref::StepSpec;
  if (moe == nullptr || gate_up_codes == nullptr || gate_up_scales == nullptr ||
      gate_up_tensor_scale == nullptr || down_codes == nullptr ||
      down_scales == nullptr || down_tensor_scale == nullptr) {
    return -1;
  }
  const StepSpec& step = moe->step;
  const bool shared = expert == -1;
  if (shared ? !moetune::ref::OwnsShared(step.config, step.shard)
             : moetune_moe_expert_owned(moe, expert) != 1) {
    return -1;
  }
  moetune::c_api::FillGateUp(
      *moe,
      shared ? moetune::ref::SharedGateUpDesc(step, moe->layer)
             : moetune::ref::ExpertGateUpDesc(step, moe->layer, expert),
      gate_up_codes, gate_up_scales, gate_up_tensor_scale);
  moetune::c_api::FillDown(
      *moe,
      shared ? moetune::ref::SharedDownDesc(step, moe->layer)
             : moetune::ref::ExpertDownDesc(step, moe->layer, expert),
      down_codes, down_scales, down_tensor_scale);
  return 0;
}

int32_t moetune_moe_fill_reference(const moetune_moe* moe, float* y) {
  if (moe == nullptr || y == nullptr) return -1;
  moetune::ref::MoeLayerReference(moe->step, moe->layer, moe->x.data(),
                                  moe->step.batch, y);
  return 0;
}

}  // extern "C"
