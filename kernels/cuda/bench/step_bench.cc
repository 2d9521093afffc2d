// moetune-step-bench: rank r's whole GLM-5 decode step on the GPU
// (kernels/cuda/step/step_gpu.h), side by side over layouts, batches, contexts
// and CUDA graph on/off: time, the roofline floor (the rank's bytes by
// category over the measured read bandwidth), efficiency, the graph's
// kernels, and where the time goes (an eager pass timed part by part).
// Every MoE layer of every configuration is checked against the trusted
// path on its own input in the step (rel_err: the worst layer). Exits 1 on
// a wrong result, 2 on a setup failure.
//
//   moetune-step-bench [--layouts=tp8,ep8] [--batches=1,8,32]
//       [--contexts=4096,32768] [--graph=both|on|off] [--layers=78]
//       [--backend=fused_gemv] [--rank=0] [--iterations=20]
//       [--warmup=3] [--preset=glm5] [--device=D]
//       [--kv_cache_dtype=bf16,fp8] [--quantization=default,all_nvfp4]
//       [--overlap=on|off|both] [--weights_ahead=on|off|both]
//       [--tile=NxK[sS]]
// --tile: the MoE backend's tile (block_n x block_k, with S ring stages
// where the backend lists them; one of its own); by
// default its tile for the layer (the default, or where that cannot run the
// layout the first that can: BackendDescriptor::TileFor), printed per run.
// --kv_cache_dtype: the latent cache's formats (bf16; fp8: E4M3 with an
// FP32 scale a 128 values, BF16 rope). --quantization: the weight maps
// (default: NVFP4 MLPs, BF16 attention and lm_head; all_nvfp4: attention
// and lm_head NVFP4 too; attention_nvfp4, lm_head_nvfp4, dense_bf16: one
// group changed). --overlap: the step's kernels launched overlapped (each
// scheduled while the one before it finishes; StepRunOptions::
// overlap_launches) or each after the previous has drained; both: side by
// side. --weights_ahead: kernels issue their weights' reads before waiting
// for the kernel before them (StepRunOptions::weights_ahead) or after.
// A layout is tpN, epN or dpN: N ranks, the MoE split N ways by TP or by
// EP (attention, the dense MLP and lm_head are split over the N ranks in
// both), or dpN: EP N ways under data-parallel attention (attention, dense
// MLP and lm_head whole, each rank batch / N of the sequences, the MoE over
// every rank's tokens). A configuration whose shard does not fit is
// reported, not run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/backends/descriptor.h"
#include "kernels/cuda/bench/bench_flags.h"
#include "kernels/cuda/step/step_gpu.h"
#include "kernels/cuda/step/step_problem.h"
#include "kernels/reference/step_bytes.h"
#include "kernels/reference/step_spec.h"

namespace moetune::gpu {
namespace {

struct Flags {
  std::vector<std::string> layouts = {"tp8", "ep8"};
  std::vector<int> batches = {1, 8, 32};
  std::vector<int> contexts = {4096, 32768};
  std::string graph = "both", backend = "fused_gemv", preset = "glm5";
  std::string overlap = "on", weights_ahead = "off";
  std::string tile;  // "NxK", or "" for the backend's own choice
  std::vector<std::string> kv_dtypes = {"bf16"}, quantizations = {"default"};
  int layers = 0, rank = 0, iterations = 20, warmup = 3, device = 0;
};

std::vector<int> Ints(const std::string& text) {
  std::vector<int> out;
  for (const std::string& s : SplitList(text))
    out.push_back(std::atoi(s.c_str()));
  return out;
}

bool ParseFlag(const std::string& arg, Flags* f) {
  const size_t eq = arg.find('=');
  if (arg.rfind("--", 0) != 0 || eq == std::string::npos) return false;
  const std::string key = arg.substr(2, eq - 2), value = arg.substr(eq + 1);
  if (key == "layouts")
    f->layouts = SplitList(value);
  else if (key == "batches")
    f->batches = Ints(value);
  else if (key == "contexts")
    f->contexts = Ints(value);
  else if (key == "graph")
    f->graph = value;
  else if (key == "overlap")
    f->overlap = value;
  else if (key == "weights_ahead")
    f->weights_ahead = value;
  else if (key == "backend")
    f->backend = value;
  else if (key == "tile")
    f->tile = value;
  else if (key == "preset")
    f->preset = value;
  else if (key == "layers")
    f->layers = std::atoi(value.c_str());
  else if (key == "rank")
    f->rank = std::atoi(value.c_str());
  else if (key == "iterations")
    f->iterations = std::atoi(value.c_str());
  else if (key == "warmup")
    f->warmup = std::atoi(value.c_str());
  else if (key == "device")
    f->device = std::atoi(value.c_str());
  else if (key == "kv_cache_dtype")
    f->kv_dtypes = SplitList(value);
  else if (key == "quantization")
    f->quantizations = SplitList(value);
  else
    return false;
  return true;
}

// Refuses a malformed --tile, naming the allowed form.
bool TileFlagOk(const std::string& tile) {
  backends::Tile parsed;
  if (backends::ParseTileText(tile, &parsed)) return true;
  std::fprintf(stderr,
               "--tile=%s: not allowed; allowed: NxK or NxKsS (S stages), one "
               "of the backend's tiles (e.g. 128x256), or none for its own "
               "choice\n",
               tile.c_str());
  return false;
}

// "tp8" -> {8, 1}, "ep8" -> {1, 8}, "dp8" -> {1, 8, dp attention}; {0, 0}
// when malformed.
ref::Shard LayoutShard(const std::string& layout, int rank) {
  const int n = layout.size() > 2 ? std::atoi(layout.c_str() + 2) : 0;
  if (n < 1) return {0, 0, 0};
  if (layout.rfind("tp", 0) == 0) return {n, 1, rank};
  if (layout.rfind("ep", 0) == 0) return {1, n, rank};
  if (layout.rfind("dp", 0) == 0) return {1, n, rank, true};
  return {0, 0, 0};
}

// Sets the spec's map and cache dtype by name; false for an unknown name.
bool ApplyFormats(const std::string& quantization, const std::string& kv,
                  ref::StepSpec* spec) {
  using ref::Precision;
  ref::Quantization& q = spec->quantization;
  q = ref::Quantization{};
  if (quantization == "all_nvfp4" || quantization == "attention_nvfp4") {
    q.attention = Precision::kNvfp4;
  }
  if (quantization == "all_nvfp4" || quantization == "lm_head_nvfp4") {
    q.lm_head = Precision::kNvfp4;
  }
  if (quantization == "dense_bf16") q.dense_mlp = Precision::kBf16;
  spec->kv_cache =
      kv == "fp8" ? ref::KvCacheDtype::kFp8E4M3 : ref::KvCacheDtype::kBf16;
  const bool known_q =
      quantization == "default" || quantization == "all_nvfp4" ||
      quantization == "attention_nvfp4" || quantization == "lm_head_nvfp4" ||
      quantization == "dense_bf16";
  return known_q && (kv == "bf16" || kv == "fp8");
}

// Refuses a --quantization or --kv_cache_dtype value, naming the allowed.
bool FormatsFlagsOk(const Flags& f) {
  ref::StepSpec spec;
  for (const std::string& q : f.quantizations) {
    for (const std::string& kv : f.kv_dtypes) {
      if (ApplyFormats(q, kv, &spec)) continue;
      std::fprintf(stderr,
                   "--quantization=%s / --kv_cache_dtype=%s: not allowed; "
                   "allowed: default, all_nvfp4, attention_nvfp4, "
                   "lm_head_nvfp4, dense_bf16 / bf16, fp8\n",
                   q.c_str(), kv.c_str());
      return false;
    }
  }
  return true;
}

bool ModeFlagOk(const char* name, const std::string& value) {
  if (value == "on" || value == "off" || value == "both") return true;
  std::fprintf(stderr, "--%s=%s: not allowed; allowed: on, off, both\n", name,
               value.c_str());
  return false;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2]
                      : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The worst relative L2 error over blocks of `block` values.
double WorstBlockError(const std::vector<float>& a, const std::vector<float>& b,
                       size_t block) {
  double worst = 0;
  for (size_t at = 0; at + block <= b.size() && at + block <= a.size();
       at += block) {
    double diff = 0, norm = 0;
    for (size_t i = at; i < at + block; ++i) {
      diff += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
      norm += double{b[i]} * b[i];
    }
    worst = std::max(worst, std::sqrt(diff / std::max(norm, 1e-30)));
  }
  return worst;
}

// The bytes by category, the eager pass's time by part ("part/kernel"
// summed by part) and its slowest kernels.
void PrintBreakdown(const ref::StepBytes& bytes, const StepRunResult& r) {
  if (r.tile.block_n > 0) {
    std::printf("    moe tile %s\n", backends::TileText(r.tile).c_str());
  }
  std::printf("    bytes MB:");
  for (const auto& [name, value] : bytes.Categories()) {
    if (value > 0) std::printf(" %s %.1f", name.c_str(), value / 1e6);
  }
  std::vector<std::pair<std::string, double>> parts;
  for (const auto& [name, us] : r.part_us) {
    const std::string part = name.substr(0, name.find('/'));
    auto it = std::find_if(parts.begin(), parts.end(),
                           [&](const auto& p) { return p.first == part; });
    if (it == parts.end()) it = parts.insert(parts.end(), {part, 0.0});
    it->second += us;
  }
  std::printf("\n    eager parts us:");
  for (const auto& [name, us] : parts)
    std::printf(" %s %.1f", name.c_str(), us);
  std::vector<std::pair<std::string, double>> kernels = r.part_us;
  std::sort(kernels.begin(), kernels.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  kernels.resize(std::min<size_t>(kernels.size(), 8));
  std::printf("\n    slowest kernels us:");
  for (const auto& [name, us] : kernels)
    std::printf(" %s %.1f", name.c_str(), us);
  std::printf("\n");
}

// The map's name as --quantization spells it (or "mixed").
std::string FormatName(const ref::StepSpec& spec) {
  for (const char* name : {"default", "all_nvfp4", "attention_nvfp4",
                           "lm_head_nvfp4", "dense_bf16"}) {
    ref::StepSpec named;
    ApplyFormats(name, "bf16", &named);
    if (named.quantization == spec.quantization) return name;
  }
  return "mixed";
}

// How the step is launched: one graph or eager; overlapped or not; its
// weights read ahead of each kernel's wait or after it.
struct Mode {
  bool graph = false, overlap = false, ahead = false;
};

// Runs one configuration; false when its result is wrong.
bool RunOne(const Flags& f, const ref::StepSpec& spec,
            const std::string& layout, const Mode& mode, double read_gbps) {
  StepRunOptions o;
  o.backend = f.backend;
  backends::ParseTileText(f.tile, &o.tile);  // checked in Main
  o.cuda_graph = mode.graph;
  o.overlap_launches = mode.overlap;
  o.weights_ahead = mode.ahead;
  o.warmup = f.warmup;
  o.iterations = f.iterations;
  o.device = f.device;
  o.compute_reference = true;
  o.profile_parts = true;
  const StepRunResult r = RunDecodeStep(MakeStepProblem(spec), o);
  std::printf("%-5s %-15s %-4s %5d %6d %-5s %-7s %-5s ", layout.c_str(),
              FormatName(spec).c_str(),
              spec.kv_cache == ref::KvCacheDtype::kFp8E4M3 ? "fp8" : "bf16",
              spec.batch, spec.context, mode.graph ? "on" : "off",
              mode.overlap ? "on" : "off", mode.ahead ? "on" : "off");
  if (r.status != RunStatus::kOk) {
    std::printf("not run: %s\n", r.message.c_str());
    return r.status == RunStatus::kCannotImplement;
  }
  const ref::StepBytes bytes =
      ref::DecodeStepByteBreakdown(spec, r.distinct_experts);
  const double floor_us = bytes.Total() / (read_gbps * 1e3);
  const double median = Median(r.samples_us);
  // Every MoE layer against the trusted path on its own input.
  const double error =
      WorstBlockError(r.moe_output, r.moe_reference,
                      static_cast<size_t>(spec.batch) * spec.config.hidden);
  const bool ok =
      error < 2e-2 &&
      r.next_tokens.size() == size_t(ref::OwnBatch(spec.shard, spec.batch));
  std::printf("%10.1f %9.1f %6.1f%% %7d %7.1f %7.1f %9.2e %s\n", median,
              floor_us, 100.0 * floor_us / median, r.kernels_per_step,
              r.weight_bytes / 1073741824.0, r.cache_bytes / 1073741824.0,
              error, ok ? "ok" : "WRONG");
  PrintBreakdown(bytes, r);
  return ok;
}

// Whether an on|off|both flag asks for `on`.
bool Wanted(const std::string& flag, bool on) {
  return flag == "both" || flag == (on ? "on" : "off");
}

// Every map, cache dtype and launch mode of one layout, batch and context.
bool RunFormats(const Flags& f, ref::StepSpec spec, const std::string& layout,
                double read_gbps) {
  bool all_ok = true;
  for (const std::string& q : f.quantizations) {
    for (const std::string& kv : f.kv_dtypes) {
      ApplyFormats(q, kv, &spec);
      for (int m = 0; m < 8; ++m) {
        const Mode mode{(m & 4) != 0, (m & 2) != 0, (m & 1) != 0};
        if (!Wanted(f.graph, mode.graph) || !Wanted(f.overlap, mode.overlap) ||
            !Wanted(f.weights_ahead, mode.ahead))
          continue;
        all_ok = RunOne(f, spec, layout, mode, read_gbps) && all_ok;
      }
    }
  }
  return all_ok;
}

int Main(const Flags& f) {
  if (!FormatsFlagsOk(f) || !ModeFlagOk("graph", f.graph) ||
      !ModeFlagOk("overlap", f.overlap) ||
      !ModeFlagOk("weights_ahead", f.weights_ahead) || !TileFlagOk(f.tile)) {
    return 2;
  }
  for (const std::string& layout : f.layouts) {
    if (LayoutShard(layout, f.rank).tp == 0) {
      std::fprintf(stderr,
                   "--layouts: '%s' is not allowed; allowed: tpN, epN or "
                   "dpN (N ranks, e.g. tp8)\n",
                   layout.c_str());
      return 2;
    }
  }
  if (DeviceCount() == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 2;
  }
  std::string error;
  const double read_gbps = MeasureReadBandwidthGBps(f.device, &error);
  const model::ModelConfig* config = model::FindPreset(f.preset);
  if (read_gbps <= 0 || config == nullptr) {
    std::fprintf(stderr, "setup: %s\n",
                 config == nullptr ? "unknown preset" : error.c_str());
    return 2;
  }
  std::printf("%s, %d layers, backend %s, rank %d; read bandwidth %.0f GB/s\n",
              config->name.c_str(),
              f.layers > 0 ? f.layers : config->num_layers, f.backend.c_str(),
              f.rank, read_gbps);
  std::printf(
      "%-5s %-15s %-4s %5s %6s %-5s %-7s %-5s %10s %9s %7s %7s %7s %7s %9s\n",
      "lay", "quantization", "kv", "batch", "ctx", "graph", "overlap", "ahead",
      "median_us", "floor_us", "eff", "kernels", "w_GiB", "kv_GiB", "rel_err");
  bool all_ok = true;
  for (const std::string& layout : f.layouts) {
    for (int batch : f.batches) {
      for (int context : f.contexts) {
        ref::StepSpec spec;
        spec.config = *config;
        spec.layers = f.layers > 0 ? f.layers : config->num_layers;
        spec.batch = batch;
        spec.context = context;
        spec.seed = 42;
        spec.shard = LayoutShard(layout, f.rank);
        const absl::Status valid = ref::ValidateStepSpec(spec);
        if (!valid.ok()) {  // e.g. a batch dpN cannot split
          std::printf("%-5s batch %d ctx %d not run: %s\n", layout.c_str(),
                      batch, context, std::string(valid.message()).c_str());
          continue;
        }
        all_ok = RunFormats(f, spec, layout, read_gbps) && all_ok;
      }
    }
  }
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace moetune::gpu

int main(int argc, char** argv) {
  moetune::gpu::Flags flags;
  for (int i = 1; i < argc; ++i) {
    if (!moetune::gpu::ParseFlag(argv[i], &flags)) {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  return moetune::gpu::Main(flags);
}
