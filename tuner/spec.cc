// Defaults, canonical workloads, normalisation and hashing. The validation
// half of spec.h is in spec_validate.cc.
#include "tuner/spec.h"

#include <cstdint>

#include "absl/strings/str_format.h"
#include "common/legacy_spelling.h"
#include "common/stable_hash.h"
#include "common/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "kernels/model/model_config.h"
#include "kernels/reference/step_spec.h"

namespace moetune::tuner {
namespace {

void CanonicaliseRouting(v1::Routing& routing) {
  if (routing.distribution() == v1::Routing::DISTRIBUTION_UNSPECIFIED) {
    routing.set_distribution(v1::Routing::UNIFORM);
  }
  if (routing.distribution() != v1::Routing::SKEWED) routing.clear_skew();
  if (routing.distribution() != v1::Routing::REPLAYED) {
    routing.clear_histogram();
  }
}

// The API's value of a reference precision.
v1::Precision ApiPrecision(ref::Precision precision) {
  return precision == ref::Precision::kNvfp4 ? v1::NVFP4 : v1::BF16;
}

// The map when nothing is left of it: an unset map and an explicit default
// are the same work, and stay the same bytes (hashes of recorded workloads).
template <typename Message>
void CanonicaliseQuantizationOf(Message& message) {
  if (!message.has_quantization()) return;
  *message.mutable_quantization() =
      CanonicalQuantization(message.quantization());
  if (message.quantization().ByteSizeLong() == 0) {
    message.clear_quantization();
  }
}

int ResolveLayers(const std::string& preset, int layers) {
  const model::ModelConfig* info = model::FindPreset(preset);
  return (layers == 0 && info != nullptr) ? info->num_layers : layers;
}

void ApplyMeasurementDefaults(v1::Measurement& m) {
  if (m.warmup_iterations() == 0) {
    m.set_warmup_iterations(kDefaultWarmupIterations);
  }
  if (m.iterations() == 0) m.set_iterations(kDefaultIterations);
  if (m.trial_timeout_s() == 0) m.set_trial_timeout_s(kDefaultTrialTimeoutS);
  if (m.max_attempts() == 0) m.set_max_attempts(kDefaultMaxAttempts);
}

void ApplySpaceDefaults(v1::SearchSpace& space) {
  if (space.tp().empty()) space.add_tp(1);
  if (space.ep().empty()) space.add_ep(1);
  if (space.cuda_graph().empty()) space.add_cuda_graph(false);
}

std::string DeterministicBytes(const google::protobuf::MessageLite& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }  // the coded stream trims `bytes` to what was written when it goes
  return bytes;
}

}  // namespace

v1::QuantizationMap CanonicalQuantization(const v1::QuantizationMap& map) {
  const ref::Quantization defaults;
  const v1::Precision experts = ApiPrecision(ref::kExpertPrecision);
  v1::QuantizationMap q = map;
  if (q.attention() == ApiPrecision(defaults.attention)) q.clear_attention();
  if (q.dense_mlp() == ApiPrecision(defaults.dense_mlp)) q.clear_dense_mlp();
  if (q.lm_head() == ApiPrecision(defaults.lm_head)) q.clear_lm_head();
  if (q.routed_experts() == experts) q.clear_routed_experts();
  if (q.shared_expert() == experts) q.clear_shared_expert();
  return q;
}

v1::SweepSpec WithDefaults(const v1::SweepSpec& spec) {
  v1::SweepSpec out = spec;
  // A string it does not know stays for ValidateSweepSpec to refuse.
  NormalizeLegacyFields(*out.mutable_space()).IgnoreError();
  v1::WorkloadSpace& workload = *out.mutable_workload();
  workload.set_layers(
      ResolveLayers(workload.model_preset(), workload.layers()));
  CanonicaliseRouting(*workload.mutable_routing());
  if (workload.region() == v1::REGION_UNSPECIFIED) {
    workload.set_region(v1::DECODE_STEP);
  }
  if (workload.chain_layers() == 1) workload.set_chain_layers(0);
  CanonicaliseQuantizationOf(workload);
  ApplySpaceDefaults(*out.mutable_space());
  if (out.strategy().kind() == v1::Strategy::KIND_UNSPECIFIED) {
    out.mutable_strategy()->set_kind(v1::Strategy::GRID);
  }
  ApplyMeasurementDefaults(*out.mutable_measurement());
  return out;
}

v1::Workload CanonicalWorkload(const v1::Workload& workload) {
  v1::Workload out = workload;
  out.set_layers(ResolveLayers(out.model_preset(), out.layers()));
  CanonicaliseRouting(*out.mutable_routing());
  if (out.region() == v1::REGION_UNSPECIFIED) out.set_region(v1::DECODE_STEP);
  if (out.chain_layers() == 1) out.set_chain_layers(0);  // both: one layer
  CanonicaliseQuantizationOf(out);
  if (out.kv_cache_dtype() == v1::KV_BF16) out.clear_kv_cache_dtype();
  return out;
}

std::string WorkloadHash(const v1::Workload& workload) {
  return absl::StrFormat(
      "%016x", Fnv1a64(DeterministicBytes(CanonicalWorkload(workload))));
}

absl::StatusOr<v1::SweepSpec> NormalizeSpec(const v1::SweepSpec& spec,
                                            const BackendCatalog& catalog) {
  RETURN_IF_ERROR(ValidateSweepSpec(spec, catalog));
  v1::SweepSpec out = WithDefaults(spec);
  out.mutable_space()->clear_plugin_backends();
  for (v1::BackendProbe& record : catalog.RecordFor(out.space())) {
    *out.mutable_space()->add_plugin_backends() = std::move(record);
  }
  return out;
}

absl::StatusOr<v1::SweepSpec> NormalizeSpec(const v1::SweepSpec& spec) {
  return NormalizeSpec(spec, BackendCatalog());
}

}  // namespace moetune::tuner
