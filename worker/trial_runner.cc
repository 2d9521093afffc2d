#include "worker/trial_runner.h"

#include <cmath>
#include <limits>
#include <span>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/comm/comm_calibration.h"
#include "common/comm/comm_model.h"
#include "common/legacy_spelling.h"
#include "common/roofline.h"
#include "common/stats.h"
#include "common/status_macros.h"
#include "kernels/model/model_config.h"
#include "kernels/reference/decode_step.h"
#include "kernels/reference/moe_reference.h"
#include "kernels/reference/router.h"
#include "worker/cpu_backend.h"

namespace moetune::worker {
namespace {

ref::RoutingSpec ResolveRouting(const v1::Routing& routing) {
  ref::RoutingSpec spec;
  switch (routing.distribution()) {
    case v1::Routing::SKEWED:
      spec.kind = ref::RoutingSpec::Kind::kSkewed;
      break;
    case v1::Routing::REPLAYED:
      spec.kind = ref::RoutingSpec::Kind::kReplayed;
      break;
    default:
      spec.kind = ref::RoutingSpec::Kind::kUniform;
  }
  spec.skew = routing.skew();
  spec.histogram.assign(routing.histogram().begin(), routing.histogram().end());
  return spec;
}

// The run's router choices of the tokens a rank's reference decodes: all
// of them, but under data-parallel attention every MoE layer routes every
// rank's tokens (rank r's `own` at rows r x own), and a rank's reference
// decodes its own sequences alone. A list of another size is passed on
// whole, for MoeLayerRoutes to refuse by its size.
std::vector<int> OwnRoutes(const ref::Shard& shard, int own, int top_k,
                           const std::vector<int>& all) {
  const size_t per_rank = static_cast<size_t>(own) * top_k;
  const size_t per_layer = per_rank * ref::World(shard);
  if (!shard.dp_attention || per_layer == 0 || all.size() % per_layer != 0) {
    return all;
  }
  std::vector<int> mine;
  for (size_t at = 0; at < all.size(); at += per_layer) {
    const auto first =
        all.begin() + static_cast<ptrdiff_t>(at + shard.rank * per_rank);
    mine.insert(mine.end(), first, first + static_cast<ptrdiff_t>(per_rank));
  }
  return mine;
}

// The choices a GPU run reported, of the sequences the reference decodes:
// `decoded` is the spec of those (its layers and batch size the reports'),
// `shard` the run's.
absl::StatusOr<ref::ProposedChoices> ReportedChoices(
    const ref::StepSpec& decoded, const ref::Shard& shard,
    const BackendRun& run) {
  ref::ProposedChoices c;
  if (!run.chosen_experts.empty()) {
    ASSIGN_OR_RETURN(
        c.routes,
        ref::MoeLayerRoutes(decoded, OwnRoutes(shard, decoded.batch,
                                               decoded.config.experts_per_token,
                                               run.chosen_experts)));
  }
  if (!run.kept_tokens.empty()) {
    ASSIGN_OR_RETURN(
        c.kept, ref::LayerKeptSets(decoded, run.kept_tokens, run.kept_counts));
  }
  return c;
}

// The sequences a GPU backend's run is checked against, from
// `first_sequence` of `spec` (ref::DecodeSequencesFollowing: a tie broken
// the other way is no error). `shard` is the run's.
absl::StatusOr<std::vector<float>> GpuReference(const ref::StepSpec& spec,
                                                int first_sequence,
                                                const ref::Shard& shard,
                                                const BackendRun& run) {
  ref::StepSpec decoded = spec;
  decoded.batch = ref::OwnBatch(spec.shard, spec.batch);
  ASSIGN_OR_RETURN(ref::ProposedChoices c,
                   ReportedChoices(decoded, shard, run));
  return ref::DecodeSequencesFollowing(spec, first_sequence, std::move(c));
}

// Under data-parallel attention a gang's rank computes the whole model's
// step of its own sequences: the unsharded reference of those.
absl::StatusOr<std::vector<float>> DataParallelGangReference(
    const TrialInputs& in, const BackendRun& run, bool gpu) {
  ref::StepSpec whole = in.step;
  whole.shard = ref::Shard{};
  whole.batch = ref::OwnBatch(in.step.shard, in.step.batch);
  const int first = ref::FirstOwnSequence(in.step.shard, in.step.batch);
  if (gpu) return GpuReference(whole, first, in.step.shard, run);
  return ref::DecodeSequences(whole, first, nullptr);
}

// A gang computes the whole model's step, every rank its vocabulary slice
// of the logits: the unsharded reference's slice of this rank. Its router
// sees the whole batch, so the reference may follow its choices.
absl::StatusOr<std::vector<float>> GangReference(const TrialInputs& in,
                                                 const BackendRun& run,
                                                 bool gpu) {
  if (in.step.shard.dp_attention) {
    return DataParallelGangReference(in, run, gpu);
  }
  ref::StepSpec whole = in.step;
  whole.shard = ref::Shard{};
  ASSIGN_OR_RETURN(std::vector<float> logits,
                   gpu ? GpuReference(whole, 0, in.step.shard, run)
                       : ref::DecodeStep(whole, nullptr));
  const int vocab = whole.config.vocab;
  const int slice = vocab / (in.step.shard.tp * in.step.shard.ep);
  const int begin = ref::VocabBegin(in.step.config, in.step.shard);
  std::vector<float> out;
  for (int b = 0; b < in.step.batch; ++b) {
    const auto row = logits.begin() + static_cast<ptrdiff_t>(b) * vocab;
    out.insert(out.end(), row + begin, row + begin + slice);
  }
  return out;
}

// A group's precision: its default when unset (proto QuantizationMap).
ref::Precision PrecisionOf(v1::Precision precision, ref::Precision unset) {
  switch (precision) {
    case v1::NVFP4:
      return ref::Precision::kNvfp4;
    case v1::BF16:
      return ref::Precision::kBf16;
    default:
      return unset;
  }
}

ref::Quantization ResolveQuantization(const v1::QuantizationMap& map) {
  const ref::Quantization defaults;
  ref::Quantization q;
  q.attention = PrecisionOf(map.attention(), defaults.attention);
  q.dense_mlp = PrecisionOf(map.dense_mlp(), defaults.dense_mlp);
  q.lm_head = PrecisionOf(map.lm_head(), defaults.lm_head);
  return q;
}

absl::StatusOr<std::vector<float>> CpuReference(const TrialInputs& in,
                                                const BackendRun& run) {
  if (in.trial.workload().region() == v1::MOE_LAYER) {
    const int layer = FirstMoeLayer(in.step);
    const std::vector<float> x = ref::MoeLayerInput(in.step, layer);
    std::vector<float> y(x.size(), 0.0f);
    ref::MoeLayerReference(in.step, layer, x.data(), in.step.batch, y.data());
    return y;
  }
  const bool gpu = in.target.is_gpu();
  if (in.gang != nullptr) return GangReference(in, run, gpu);
  return gpu ? GpuReference(in.step, 0, in.step.shard, run)
             : ref::DecodeStep(in.step, nullptr);
}

void Fail(v1::TrialResult* result, v1::TrialState outcome,
          const std::string& reason) {
  result->set_outcome(outcome);
  result->set_reason(reason);
}

void AttachRoofline(const TrialInputs& in, const BackendRun& run,
                    const comm::CommModelParams& params, double read_gbps,
                    v1::TrialResult* result) {
  const double bytes = run.bytes;
  v1::Roofline* roofline = result->mutable_roofline();
  roofline->set_bytes(bytes);
  comm::CommShape shape;
  shape.batch = in.step.batch;
  shape.hidden = in.step.config.hidden;
  shape.top_k = in.step.config.experts_per_token;
  shape.tp = in.step.shard.tp;
  shape.ep = in.step.shard.ep;
  shape.layers =
      in.trial.workload().region() == v1::MOE_LAYER ? 1 : in.step.layers;
  shape.whole_step = in.trial.workload().region() == v1::DECODE_STEP;
  shape.dense_layers = in.step.config.num_dense_layers;
  shape.all_reduce = in.trial.config().all_reduce_impl();
  shape.dp_attention = in.step.shard.dp_attention;
  const double model_us = comm::ModelCommFloorUs(shape, params);
  const bool measured = run.comm_measured_us >= 0;
  // Measured: the gang's collectives timed alone are the communication's
  // floor, and the median holds them; the model's figure is kept beside.
  const double comm_us = measured ? run.comm_measured_us : model_us;
  const double memory_us = read_gbps > 0 ? bytes / (read_gbps * 1e3) : 0;
  roofline->set_comm_floor_us(comm_us);
  roofline->set_comm_modelled(!measured && shape.tp * shape.ep > 1);
  if (measured) {
    roofline->set_comm_measured_us(run.comm_measured_us);
    roofline->set_comm_model_us(model_us);
  }
  roofline->set_floor_us(memory_us + comm_us);
  roofline->set_efficiency(
      RooflineEfficiency(*roofline, result->stats().median_us()));
}

// Whether the trial's attention is ATTENTION_DP (ATTENTION_TP and unset
// are not). dp splits a whole step's batch, which an MoE layer timed alone
// does not have. The tuner's validation refuses both before a trial
// exists; this is the worker's own word on trials that reach it otherwise.
absl::StatusOr<bool> ResolveDpAttention(const v1::Trial& trial) {
  const v1::AttentionSplit split = trial.config().attention_split();
  if (split == v1::ATTENTION_SPLIT_UNSPECIFIED || split == v1::ATTENTION_TP) {
    return false;
  }
  if (split != v1::ATTENTION_DP) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.attention_split: ", split,
                     " is not allowed; allowed: ATTENTION_TP, ATTENTION_DP"));
  }
  if (trial.workload().region() == v1::MOE_LAYER) {
    return absl::InvalidArgumentError(
        "config.attention_split: ATTENTION_DP splits a decode step's batch "
        "over the ranks; with region MOE_LAYER allowed: ATTENTION_TP");
  }
  return true;
}

}  // namespace

absl::StatusOr<ref::StepSpec> ResolveStep(const v1::Trial& trial) {
  const v1::Workload& w = trial.workload();
  ASSIGN_OR_RETURN(model::ModelConfig config,
                   model::PresetByName(w.model_preset()));
  ref::StepSpec step;
  step.layers = w.layers() > 0 ? std::min(w.layers(), config.num_layers)
                               : config.num_layers;
  step.config = std::move(config);
  step.batch = w.batch_size();
  step.context = w.context_length();
  step.routing = ResolveRouting(w.routing());
  step.seed = w.seed();
  step.quantization = ResolveQuantization(w.quantization());
  step.kv_cache = w.kv_cache_dtype() == v1::KV_FP8_E4M3
                      ? ref::KvCacheDtype::kFp8E4M3
                      : ref::KvCacheDtype::kBf16;
  step.shard.tp = std::max(1, trial.config().tp());
  step.shard.ep = std::max(1, trial.config().ep());
  step.shard.rank = 0;
  ASSIGN_OR_RETURN(step.shard.dp_attention, ResolveDpAttention(trial));
  return step;
}

namespace {

// RelativeL2Error over views, so that a chain's layers are judged in place.
double RelativeL2ErrorOf(std::span<const float> out,
                         std::span<const float> ref) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (out.size() != ref.size() || out.empty()) return kInf;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i]) || !std::isfinite(ref[i])) return kInf;
    const double d = static_cast<double>(out[i]) - ref[i];
    diff += d * d;
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  if (norm == 0) return diff == 0 ? 0 : kInf;
  return std::sqrt(diff / norm);
}

}  // namespace

double RelativeL2Error(const std::vector<float>& out,
                       const std::vector<float>& ref) {
  return RelativeL2ErrorOf(out, ref);
}

double WorstLayerError(const std::vector<float>& out,
                       const std::vector<float>& ref, int layers, int* layer) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  *layer = 0;
  if (layers < 1 || out.size() != ref.size() || out.size() % layers != 0)
    return kInf;
  const size_t n = out.size() / layers;
  double worst = -1;
  for (int i = 0; i < layers; ++i) {
    const double e = RelativeL2ErrorOf(std::span(out).subspan(i * n, n),
                                       std::span(ref).subspan(i * n, n));
    if (!(e <= worst)) {  // NaN-proof: a NaN is the worst
      worst = e;
      *layer = i;
    }
  }
  return worst;
}

// Checks the run against the reference and fills statistics and roofline.
static void Judge(const TrialInputs& in,
                  const backends::BackendDescriptor& backend,
                  const BackendRun& run, const v1::Probe& probe,
                  const comm::CommModelParams& params, const Clock& clock,
                  v1::TrialResult* result) {
  double check_s = run.check_s;
  std::vector<float> cpu_reference;  // when the backend brought none
  if (run.reference.empty()) {
    const AddElapsedSeconds checking(clock, &check_s);
    absl::StatusOr<std::vector<float>> computed = CpuReference(in, run);
    if (!computed.ok()) {
      Fail(result, v1::FAILED,
           absl::StrCat("the reference could not be computed: ",
                        computed.status().message()));
      return;
    }
    cpu_reference = *std::move(computed);
  }
  const std::vector<float>& reference =
      run.reference.empty() ? cpu_reference : run.reference;
  result->set_check_s(check_s);
  result->set_timed_s(run.timed_s);
  int layer = 0;
  result->set_max_rel_error(
      WorstLayerError(run.output, reference, run.layers, &layer));
  result->set_error_bound(backend.error_bound);
  *result->mutable_stats() = stats::Summarize(run.samples_us);
  result->mutable_samples_us()->Add(run.samples_us.begin(),
                                    run.samples_us.end());
  AttachRoofline(in, run, params, probe.device().measured_read_gbps(), result);
  if (in.gang != nullptr) result->set_world_size(in.gang->world_size());
  // Written so that NaN fails too.
  if (!(result->max_rel_error() <= result->error_bound())) {
    Fail(result, v1::INCORRECT,
         absl::StrCat("relative error ", result->max_rel_error(),
                      run.layers > 1
                          ? absl::StrCat(" (layer ", layer + 1,
                                         " of the chain of ", run.layers, ")")
                          : "",
                      " exceeds the bound ", result->error_bound()));
    return;
  }
  result->set_outcome(v1::DONE);
}

namespace {

// The trial's step, its config's legacy all-reduce and attention strings
// (from a coordinator that still writes them) moved into the enums first.
absl::StatusOr<ref::StepSpec> NormalizeAndResolve(v1::Trial& trial) {
  RETURN_IF_ERROR(NormalizeLegacyFields(*trial.mutable_config()));
  return ResolveStep(trial);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GangRendezvous>> TrialRunner::RendezvousFor(
    const v1::TrialExecution& execution) const {
  if (!execution.has_gang()) return std::unique_ptr<GangRendezvous>();
  if (rendezvous_ == nullptr) {
    return absl::FailedPreconditionError(
        "a gang trial reached a trial runner with no way to meet its gang");
  }
  return rendezvous_(execution);
}

v1::TrialResult TrialRunner::Run(const v1::TrialExecution& execution) {
  v1::TrialResult result;
  v1::Trial trial = execution.trial();
  result.set_trial_id(trial.trial_id());
  result.set_attempt(trial.attempt());
  *result.mutable_fingerprint() = execution.probe().fingerprint();
  Backend* backend = registry_->Find(trial.config().moe_backend());
  if (backend == nullptr) {
    Fail(&result, v1::FAILED,
         absl::StrCat("unknown backend '", trial.config().moe_backend(), "'"));
    return result;
  }
  absl::StatusOr<ref::StepSpec> step = NormalizeAndResolve(trial);
  if (!step.ok()) {
    Fail(&result, v1::FAILED, std::string(step.status().message()));
    return result;
  }
  TrialInputs in{trial, *step, DeviceTarget{execution.device_ordinal()}};
  absl::StatusOr<std::unique_ptr<GangRendezvous>> rendezvous =
      RendezvousFor(execution);
  if (!rendezvous.ok()) {
    Fail(&result, v1::FAILED, std::string(rendezvous.status().message()));
    return result;
  }
  if (execution.has_gang()) {
    in.gang = &execution.gang();
    in.rendezvous = rendezvous->get();
    in.step.shard.rank = execution.gang().rank();
  }
  absl::StatusOr<BackendRun> run = backend->Run(in);
  if (!run.ok()) {
    Fail(&result, v1::FAILED, run.status().ToString());
    return result;
  }
  Judge(in, backend->descriptor(), *run, execution.probe(),
        comm::ParamsFrom(execution.comm_calibration()), *clock_, &result);
  return result;
}

}  // namespace moetune::worker
