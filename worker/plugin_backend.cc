#include "worker/plugin_backend.h"

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "kernels/backends/tile_shape.h"
#include "kernels/reference/moe_reference.h"
#include "proto/plugin.pb.h"
#include "worker/cpu_backend.h"
#include "worker/plugin_protocol.h"
#include "worker/trial_executor.h"

namespace moetune::worker {
namespace {

namespace pv1 = plugin::v1;

// Why a call got no reply, in the plugin's words.
std::string DescribeCall(const ChildOutcome& outcome) {
  if (!outcome.frame_error.empty()) {
    return absl::StrCat("sent garbage: ", outcome.frame_error);
  }
  switch (outcome.kind) {
    case ChildOutcome::Kind::kExited:
      return absl::StrCat("exited (status ", outcome.exit_code,
                          ") without a reply");
    case ChildOutcome::Kind::kSignaled:
      return absl::StrCat("crashed: killed by signal ", outcome.signal, " (",
                          strsignal(outcome.signal), ")");
    case ChildOutcome::Kind::kTimedOut:
      return "hung: no reply before its deadline; killed";
    case ChildOutcome::Kind::kCancelled:
      return "was cancelled";
    case ChildOutcome::Kind::kSpawnFailed:
      return absl::StrCat("could not be started: ", outcome.error);
  }
  return "failed";
}

std::string StderrTail(const ChildOutcome& outcome) {
  constexpr size_t kMax = 400;
  const std::string& tail = outcome.stderr_tail;
  if (tail.empty()) return "";
  return absl::StrCat(
      "; its stderr ends: ",
      tail.size() > kMax ? tail.substr(tail.size() - kMax) : tail);
}

pv1::Device DeviceOf(const DeviceTarget& target) {
  pv1::Device device;
  device.set_is_gpu(target.is_gpu());
  device.set_ordinal(target.ordinal);
  return device;
}

const char* RoutingName(v1::Routing::Distribution distribution) {
  switch (distribution) {
    case v1::Routing::SKEWED:
      return "skewed";
    case v1::Routing::REPLAYED:
      return "replayed";
    default:
      return "uniform";
  }
}

pv1::MoeInputs InputsOf(const TrialInputs& in, const std::string& library) {
  pv1::MoeInputs inputs;
  const v1::Workload& w = in.trial.workload();
  inputs.set_model_library(library);
  inputs.set_preset(w.model_preset());
  inputs.set_seed(w.seed());
  inputs.set_batch(in.step.batch);
  inputs.set_layer(FirstMoeLayer(in.step));
  inputs.set_tp(in.step.shard.tp);
  inputs.set_ep(in.step.shard.ep);
  inputs.set_rank(in.step.shard.rank);
  pv1::Routing* routing = inputs.mutable_routing();
  routing->set_distribution(RoutingName(w.routing().distribution()));
  routing->set_skew(w.routing().skew());
  *routing->mutable_histogram() = w.routing().histogram();
  return inputs;
}

std::string VersionText(const pv1::ComponentVersion& v) {
  return absl::StrCat(v.name(), " ",
                      v.version().empty() ? "absent" : v.version());
}

// The plugin's probe as the worker stores it.
v1::BackendProbe ToBackendProbe(const std::string& name,
                                const std::string& plugin,
                                const pv1::ProbeReply& reply,
                                const backends::BackendDescriptor& d) {
  v1::BackendProbe probe;
  probe.set_name(name);
  probe.set_available(reply.available());
  probe.set_reason(reply.reason());
  AddTiles(d, &probe);
  for (const pv1::ComponentVersion& v : reply.versions()) {
    probe.add_versions(VersionText(v));
  }
  probe.set_plugin(plugin);
  probe.set_error_bound(d.error_bound);
  probe.set_error_bound_why(reply.error_bound_why());
  probe.set_graph_capturable(d.graph_capturable);
  probe.set_runs_on_gpu(d.is_gpu());
  return probe;
}

// The bound the worker checks the plugin's output with: its own claim,
// capped; by placement (as native backends') when it claims none.
double ErrorBoundOf(const pv1::ProbeReply& reply) {
  if (!(reply.error_bound() > 0)) {
    return reply.placement() == pv1::GPU ? 2e-2 : 1e-4;
  }
  return std::min(reply.error_bound(), kMaxPluginErrorBound);
}

absl::Status CheckRunnable(const TrialInputs& in) {
  if (in.trial.workload().region() != v1::MOE_LAYER) {
    return absl::FailedPreconditionError(
        "plugin backends time the MOE_LAYER region only (workload.region)");
  }
  if (in.trial.workload().chain_layers() > 1) {
    return absl::FailedPreconditionError(
        "plugin backends time one MoE layer (workload.chain_layers: 0 or 1)");
  }
  if (in.trial.config().communication() == v1::MEASURED) {
    return absl::FailedPreconditionError(
        "plugin backends run one rank's shard; MEASURED communication needs "
        "a native GPU backend");
  }
  return absl::OkStatus();
}

pv1::PluginRequest RunRequestOf(const TrialInputs& in,
                                const std::string& backend,
                                const std::string& library,
                                const backends::Tile& tile) {
  pv1::PluginRequest request;
  pv1::RunRequest* run = request.mutable_run();
  run->set_backend(backend);
  *run->mutable_inputs() = InputsOf(in, library);
  run->mutable_tile()->set_block_n(tile.block_n);
  run->mutable_tile()->set_block_k(tile.block_k);
  run->mutable_tile()->set_stages(tile.stages);
  run->set_cuda_graph(in.trial.config().cuda_graph());
  run->set_warmup_iterations(in.trial.measurement().warmup_iterations());
  run->set_iterations(in.trial.measurement().iterations());
  *run->mutable_device() = DeviceOf(in.target);
  return request;
}

// The run reply as the TrialRunner judges it; DATA_LOSS when its output or
// samples break the protocol.
absl::StatusOr<BackendRun> RunOf(const pv1::RunReply& reply,
                                 const TrialInputs& in) {
  BackendRun run;
  ASSIGN_OR_RETURN(
      run.output, DecodeRunOutput(reply, in.step.batch, in.step.config.hidden));
  ASSIGN_OR_RETURN(
      run.samples_us,
      DecodeRunSamples(reply, in.trial.measurement().iterations()));
  run.check_s = reply.check_s();
  run.timed_s = reply.timed_s();
  const int layer = FirstMoeLayer(in.step);
  const std::vector<float> x = ref::MoeLayerInput(in.step, layer);
  run.bytes = static_cast<double>(
      ref::MoeLayerBytes(in.step, layer, x.data(), in.step.batch));
  return run;
}

class PluginBackend final : public Backend {
 public:
  PluginBackend(PluginSpec spec, PluginOptions options,
                std::unique_ptr<PluginProcess> process)
      : spec_(std::move(spec)),
        options_(std::move(options)),
        process_(std::move(process)),
        command_text_(absl::StrJoin(spec_.command, " ")) {
    descriptor_.name = spec_.backend;
    description_ = absl::StrCat("out-of-process backend: ", command_text_);
    descriptor_.description = description_;
  }
  ~PluginBackend() override { process_->Stop(); }

  const backends::BackendDescriptor& descriptor() const override {
    return descriptor_;
  }
  v1::BackendProbe Probe(const DeviceTarget& target) override;
  absl::StatusOr<BackendRun> Run(const TrialInputs& in) override;

 private:
  // One request, one reply of `kind`; any failure ends the process.
  absl::StatusOr<pv1::PluginReply> Exchange(const pv1::PluginRequest& request,
                                            ReplyKind kind,
                                            std::chrono::milliseconds deadline);
  // Hello and probe on a fresh process; the descriptor learns the probe.
  absl::Status Handshake(const DeviceTarget& target);
  absl::Status Hello(std::chrono::milliseconds deadline);
  void Learn(const pv1::ProbeReply& reply);
  absl::StatusOr<backends::Tile> TileFor(const v1::TileShape& shape) const;
  absl::StatusOr<BackendRun> RunOnPlugin(const TrialInputs& in);

  const PluginSpec spec_;
  const PluginOptions options_;
  std::unique_ptr<PluginProcess> process_;
  const std::string command_text_;
  // What descriptor_'s views point into.
  std::string description_;
  std::vector<backends::Tile> tiles_;
  backends::BackendDescriptor descriptor_;
  pv1::ProbeReply probe_;
};

absl::StatusOr<pv1::PluginReply> PluginBackend::Exchange(
    const pv1::PluginRequest& request, ReplyKind kind,
    std::chrono::milliseconds deadline) {
  const ChildOutcome outcome =
      process_->Call(EncodePluginRequest(request), deadline);
  if (outcome.kind != ChildOutcome::Kind::kExited || outcome.exit_code != 0) {
    process_->Stop();
    return absl::InternalError(absl::StrCat("plugin '", command_text_, "' ",
                                            DescribeCall(outcome),
                                            StderrTail(outcome)));
  }
  absl::StatusOr<pv1::PluginReply> reply =
      DecodePluginReply(outcome.stdout_data, kind);
  // An Error reply is an answer; anything else wrong leaves a process whose
  // next reply cannot be trusted.
  if (absl::IsDataLoss(reply.status())) process_->Stop();
  return reply;
}

absl::Status PluginBackend::Hello(std::chrono::milliseconds deadline) {
  pv1::PluginRequest request;
  request.mutable_hello()->set_backend(spec_.backend);
  request.mutable_hello()->set_worker_version(options_.worker_version);
  ASSIGN_OR_RETURN(pv1::PluginReply reply,
                   Exchange(request, ReplyKind::kHello, deadline));
  const auto& offered = reply.hello().backends();
  if (std::find(offered.begin(), offered.end(), spec_.backend) ==
      offered.end()) {
    process_->Stop();
    return absl::UnavailableError(absl::StrCat(
        "plugin '", command_text_, "' does not serve backend '", spec_.backend,
        "'; it serves: ", absl::StrJoin(offered, ", ")));
  }
  return absl::OkStatus();
}

absl::Status PluginBackend::Handshake(const DeviceTarget& target) {
  RETURN_IF_ERROR(Hello(options_.setup_deadline));
  pv1::PluginRequest request;
  *request.mutable_probe()->mutable_device() = DeviceOf(target);
  request.mutable_probe()->set_backend(spec_.backend);
  ASSIGN_OR_RETURN(pv1::PluginReply reply, Exchange(request, ReplyKind::kProbe,
                                                    options_.setup_deadline));
  Learn(reply.probe());
  return absl::OkStatus();
}

void PluginBackend::Learn(const pv1::ProbeReply& reply) {
  probe_ = reply;
  tiles_.clear();
  for (const pv1::Tile& t : reply.tiles()) {
    tiles_.push_back({t.block_n(), t.block_k(), t.stages()});
  }
  descriptor_.tiles = tiles_;
  descriptor_.placement = reply.placement() == pv1::GPU
                              ? backends::Placement::kGpu
                              : backends::Placement::kCpu;
  descriptor_.graph_capturable = reply.graph_capturable();
  descriptor_.error_bound = ErrorBoundOf(reply);
  if (!reply.description().empty()) {
    description_ = absl::StrCat(reply.description(),
                                " (out-of-process: ", command_text_, ")");
    descriptor_.description = description_;
  }
}

v1::BackendProbe PluginBackend::Probe(const DeviceTarget& target) {
  const absl::Status handshake = Handshake(target);
  // A probe leaves no process behind: the worker's own process probes, and
  // a plugin holding a GPU context there would take a trial's memory.
  process_->Stop();
  if (!handshake.ok()) {
    v1::BackendProbe probe;
    probe.set_name(spec_.backend);
    probe.set_available(false);
    probe.set_reason(std::string(handshake.message()));
    probe.set_plugin(command_text_);
    return probe;
  }
  return ToBackendProbe(spec_.backend, command_text_, probe_, descriptor_);
}

absl::StatusOr<backends::Tile> PluginBackend::TileFor(
    const v1::TileShape& shape) const {
  const backends::Tile tile = backends::TileOf(shape);
  if (tile == backends::Tile{}) return descriptor_.DefaultTile();
  if (descriptor_.HasTile(tile)) return tile;
  return absl::FailedPreconditionError(absl::StrCat(
      spec_.backend, " has no tile ", backends::TileText(tile),
      "; its tiles: ", tiles_.empty() ? "none" : descriptor_.TileList()));
}

absl::StatusOr<BackendRun> PluginBackend::Run(const TrialInputs& in) {
  RETURN_IF_ERROR(CheckRunnable(in));
  if (!process_->Alive()) RETURN_IF_ERROR(Handshake(in.target));
  if (!probe_.available()) {
    return absl::UnavailableError(
        absl::StrCat(spec_.backend, " is unavailable: ", probe_.reason()));
  }
  return RunOnPlugin(in);
}

absl::StatusOr<BackendRun> PluginBackend::RunOnPlugin(const TrialInputs& in) {
  ASSIGN_OR_RETURN(backends::Tile tile, TileFor(in.trial.config().tile()));
  ASSIGN_OR_RETURN(
      pv1::PluginReply reply,
      Exchange(RunRequestOf(in, spec_.backend, options_.model_library, tile),
               ReplyKind::kRun, PluginRunDeadline(in.trial)));
  absl::StatusOr<BackendRun> run = RunOf(reply.run(), in);
  if (!run.ok()) process_->Stop();  // it broke the protocol: start afresh
  return run;
}

}  // namespace

std::chrono::milliseconds PluginRunDeadline(const v1::Trial& trial) {
  return TrialDeadline(trial) * 3 / 4;
}

std::unique_ptr<Backend> MakePluginBackend(
    PluginSpec spec, PluginOptions options,
    std::unique_ptr<PluginProcess> process) {
  return std::make_unique<PluginBackend>(std::move(spec), std::move(options),
                                         std::move(process));
}

}  // namespace moetune::worker
