// moetune-kernel-bench: every GPU MoE backend x tile x CUDA graph on the
// GLM-5 MoE layer (or tiny dims), side by side, each output checked against
// the trusted GPU path, which is itself checked against a CPU evaluation of
// the formula. Exits 1 on any wrong result, 2 on a setup failure.
//
//   moetune-kernel-bench [--batches=1,8,32] [--iterations=20] [--warmup=3]
//       [--backends=dequant_cublas,fused_gemv,...] [--graph=both|on|off]
//       [--tiles=16x256,...] [--tiny] [--seed=N] [--layer=L]
//       [--chain=N] [--device=D] [--cpu-threads=N] [--no-cpu-check]
//       [--routing=uniform,skewed]
// --backends defaults to every implemented GPU backend of the registry;
// --tiles keeps only the named tiles of tiled backends (written as the tiles
// list prints them, a ring depth included: 128x256s2);
// --chain=N times layers L .. L + N - 1 (each its own weights) back to back,
// in one graph when graph is on, as a decode step runs them, and prints the
// figures per layer; every layer's output is checked against the trusted
// path of that layer (its weights, layer L's input and bias).
// --routing runs every batch under each routing: uniform (a small hash
// bias) and skewed (the workload's SKEWED routing at skew 1: the expert of
// Zipf rank r gets bias 0.5 / r, ref::RouterBias).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/backends/registry.h"
#include "kernels/cuda/bench/bench_flags.h"
#include "kernels/cuda/bench/cpu_check.h"
#include "kernels/cuda/moe/moe_gpu.h"
#include "kernels/model/model_config.h"
#include "kernels/model/weight_gen.h"
#include "kernels/reference/router.h"

namespace moetune::gpu {
namespace {

// Pass bound for every backend against the trusted path: BF16 input, fp16
// weights and activations into fp32 accumulation land near 1e-3.
constexpr double kTolerance = 2e-2;
// The trusted path (float) against the CPU evaluation (double).
constexpr double kTrustedTolerance = 1e-3;

// Every GPU backend of the registry that has kernels.
std::vector<std::string> ImplementedGpuBackends() {
  std::vector<std::string> names;
  for (const backends::BackendDescriptor* b : backends::AllBackends()) {
    if (b->is_gpu() && b->gpu.not_implemented.empty())
      names.emplace_back(b->name);
  }
  return names;
}

struct Flags {
  std::vector<int> batches = {1, 8, 32};
  std::vector<std::string> backends = ImplementedGpuBackends();
  int iterations = 20, warmup = 3, device = 0, layer = 3, chain = 1;
  int cpu_threads =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  uint64_t seed = 42;
  std::string graph = "both";
  std::vector<std::string> tiles;  // empty: all
  std::vector<std::string> routings = {"uniform"};
  bool tiny = false, cpu_check = true;
};

bool ParseFlag(const std::string& arg, Flags* f) {
  const size_t eq = arg.find('=');
  const std::string key = arg.substr(0, eq),
                    value = eq == std::string::npos ? "" : arg.substr(eq + 1);
  if (key == "--batches") {
    f->batches.clear();
    for (const std::string& b : SplitList(value))
      f->batches.push_back(std::atoi(b.c_str()));
  } else if (key == "--backends") {
    f->backends = SplitList(value);
  } else if (key == "--iterations") {
    f->iterations = std::atoi(value.c_str());
  } else if (key == "--warmup") {
    f->warmup = std::atoi(value.c_str());
  } else if (key == "--device") {
    f->device = std::atoi(value.c_str());
  } else if (key == "--layer") {
    f->layer = std::atoi(value.c_str());
  } else if (key == "--chain") {
    f->chain = std::atoi(value.c_str());
  } else if (key == "--seed") {
    f->seed = std::strtoull(value.c_str(), nullptr, 10);
  } else if (key == "--cpu-threads") {
    f->cpu_threads = std::atoi(value.c_str());
  } else if (key == "--graph" &&
             (value == "both" || value == "on" || value == "off")) {
    f->graph = value;
  } else if (key == "--tiles") {
    f->tiles = SplitList(value);
  } else if (key == "--routing") {
    f->routings = SplitList(value);
    for (const std::string& r : f->routings) {
      if (r != "uniform" && r != "skewed") return false;
    }
  } else if (key == "--tiny") {
    f->tiny = true;
  } else if (key == "--no-cpu-check") {
    f->cpu_check = false;
  } else {
    return false;
  }
  return true;
}

MoeDims Dims(bool tiny) {
  if (tiny) return {256, 128, 32, 8, 1, 2.5f};
  return {6144, 2048, 256, 8, 1, 2.5f};
}

// Random inputs; uniform routing: a small hash bias (|b| < 0.01); skewed:
// the reference's Zipf bias at skew 1.
MoeProblem MakeProblem(const Flags& f, int batch, const std::string& routing) {
  MoeProblem p;
  p.dims = Dims(f.tiny);
  p.seed = f.seed;
  p.layer = f.layer;
  p.batch = batch;
  std::mt19937_64 rng(f.seed * 1000003u + static_cast<uint64_t>(batch));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  p.input.resize(static_cast<size_t>(batch) * p.dims.hidden);
  for (float& v : p.input) v = u(rng);
  for (int e = 0; e < p.dims.num_experts; ++e) {
    p.router_bias.push_back(
        0.01f * weights::UnitUniform(weights::Hash(
                    f.seed, static_cast<uint32_t>(f.layer),
                    weights::kRouterBias, static_cast<uint64_t>(e))));
  }
  if (routing == "skewed") {
    ref::StepSpec spec;
    spec.config = *model::FindPreset(f.tiny ? "tiny" : "glm5");
    spec.seed = f.seed;
    spec.routing.kind = ref::RoutingSpec::Kind::kSkewed;
    spec.routing.skew = 1.0;
    p.router_bias = ref::RouterBias(spec, f.layer);
  }
  return p;
}

struct Check {
  double rel_l2 = 0, max_rel = 0;
  int wrong = 0;
  bool ok() const { return wrong == 0 && rel_l2 <= kTolerance; }
};

// max_rel: max |out - ref| / max(|ref|, rms(ref)); wrong: elements above the
// tolerance by that measure, or not finite.
Check Compare(const std::vector<float>& out, const std::vector<float>& ref) {
  Check c;
  if (out.size() != ref.size()) {
    c.wrong = static_cast<int>(std::max(out.size(), ref.size()));
    return c;
  }
  double ss = 0, diff = 0;
  for (float r : ref) ss += static_cast<double>(r) * r;
  const double rms = std::sqrt(ss / std::max<size_t>(1, ref.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const double d = std::fabs(static_cast<double>(out[i]) - ref[i]);
    diff += d * d;
    const double rel =
        d / std::max(std::fabs(static_cast<double>(ref[i])), rms);
    if (!std::isfinite(out[i]) || !(rel <= kTolerance)) ++c.wrong;
    if (std::isfinite(rel)) c.max_rel = std::max(c.max_rel, rel);
  }
  c.rel_l2 = std::sqrt(diff / std::max(ss, 1e-300));
  if (!std::isfinite(c.rel_l2)) c.rel_l2 = INFINITY;
  return c;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(q * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct Config {
  std::string backend;
  backends::Tile tile;
  bool graph = false;
};

std::vector<Config> Configs(const Flags& f) {
  std::vector<Config> out;
  for (const std::string& name : f.backends) {
    const backends::BackendDescriptor* info = backends::FindBackend(name);
    std::vector<backends::Tile> tiles;
    if (info != nullptr) tiles.assign(info->tiles.begin(), info->tiles.end());
    if (tiles.empty()) tiles.push_back(backends::Tile{});
    for (const backends::Tile& t : tiles) {
      const std::string text = backends::TileText(t);
      if (t.block_n != 0 && !f.tiles.empty() &&
          std::find(f.tiles.begin(), f.tiles.end(), text) == f.tiles.end()) {
        continue;
      }
      for (const bool graph : {false, true}) {
        if ((graph && f.graph == "off") || (!graph && f.graph == "on"))
          continue;
        out.push_back({name, t, graph});
      }
    }
  }
  return out;
}

void PrintHeader() {
  std::printf(
      "%-16s %-9s %-5s %5s %10s %10s %9s %8s %9s %10s %11s %7s %9s  %s\n",
      "backend", "tile", "graph", "batch", "median_us", "p90_us", "bytes_MB",
      "GB/s", "floor_us", "efficiency", "max_rel_err", "#wrong", "rel_l2",
      "status");
  std::printf(
      "%-16s %-9s %-5s %5s %10s %10s %9s %8s %9s %10s %11s %7s %9s  %s\n", "-",
      "NxK[sS]", "-", "tok", "us", "us", "1e6 B", "1e9B/s", "us", "floor/med",
      "|d|/max(|r|,rms)", "count", "|d|2/|r|2", "-");
}

struct Totals {
  int wrong_configs = 0, errors = 0;
};

void RunConfig(const Flags& f, const MoeProblem& p, const Config& c,
               double bw_gbps, const std::vector<float>& ref, Totals* totals) {
  MoeRunOptions o;
  o.backend = c.backend;
  o.tile = c.tile;
  o.cuda_graph = c.graph;
  o.iterations = f.iterations;
  o.warmup = f.warmup;
  o.device = f.device;
  o.chain_layers = f.chain;
  const MoeRunResult r = RunMoeLayer(p, o);
  const std::string tile = backends::TileText(c.tile);
  if (r.status != RunStatus::kOk) {
    const bool error = r.status == RunStatus::kCudaError;
    totals->errors += error ? 1 : 0;
    std::printf("%-16s %-9s %-5s %5d  %s: %s\n", c.backend.c_str(),
                tile.c_str(), c.graph ? "on" : "off", p.batch,
                error ? "CUDA ERROR" : "not run", r.message.c_str());
    return;
  }
  const Check chk = Compare(r.output, ref);
  if (!chk.ok()) ++totals->wrong_configs;
  const double med = Percentile(r.samples_us, 0.5),
               p90 = Percentile(r.samples_us, 0.9);
  const double floor_us = r.bytes / (bw_gbps * 1e3);
  std::printf(
      "%-16s %-9s %-5s %5d %10.1f %10.1f %9.1f %8.0f %9.1f %10.3f %11.2e %7d "
      "%9.2e  %s\n",
      c.backend.c_str(), tile.c_str(), c.graph ? "on" : "off", p.batch, med,
      p90, r.bytes / 1e6, r.bytes / (med * 1e3), floor_us, floor_us / med,
      chk.max_rel, chk.wrong, chk.rel_l2, chk.ok() ? "ok" : "WRONG");
  std::fflush(stdout);
}

// Whether backend `name` takes `batch` tokens (its descriptor's max_batch).
bool TakesBatch(const std::string& name, int batch) {
  const backends::BackendDescriptor* info = backends::FindBackend(name);
  return info == nullptr || info->max_batch <= 0 || batch <= info->max_batch;
}

// The trusted path's output for p (every layer of the chain), from a run of
// the first backend that may host it (backends::TrustedPathBackends) and
// can take the batch.
bool TrustedOutput(const Flags& f, const MoeProblem& p, std::vector<float>* ref,
                   int* distinct) {
  for (const backends::BackendDescriptor* host :
       backends::TrustedPathBackends()) {
    const std::string backend(host->name);
    if (!TakesBatch(backend, p.batch)) continue;
    MoeRunOptions o;
    o.backend = backend;
    o.iterations = 1;
    o.warmup = 0;
    o.device = f.device;
    o.compute_reference = true;
    o.chain_layers = f.chain;
    const MoeRunResult r = RunMoeLayer(p, o);
    if (r.status == RunStatus::kOk) {
      *ref = r.reference_output;
      *distinct = r.distinct_experts;
      return true;
    }
    std::printf("  trusted path via %s: %s\n", backend.c_str(),
                r.message.c_str());
  }
  return false;
}

// The trusted path against the CPU evaluation: a handful of elements at full
// dims, everything at tiny dims.
bool CheckTrusted(const Flags& f, const MoeProblem& p,
                  const std::vector<float>& ref) {
  std::vector<int> tokens, rows;
  if (f.tiny) {
    for (int t = 0; t < p.batch; ++t) tokens.push_back(t);
    for (int r = 0; r < p.dims.hidden; ++r) rows.push_back(r);
  } else {
    tokens = {0, p.batch - 1};
    if (p.batch == 1) tokens.pop_back();
    rows = {0, 1, 7, 8, 15, 777, 3071, 3072, 4095, 5000, 6142, 6143};
  }
  const std::vector<double> cpu =
      cpu::OutputRows(p, tokens, rows, f.cpu_threads);
  double ss = 0, worst = 0;
  for (double v : cpu) ss += v * v;
  const double rms = std::sqrt(ss / cpu.size());
  size_t i = 0;
  for (int t : tokens) {
    for (int r : rows) {
      const double gpu = ref[static_cast<size_t>(t) * p.dims.hidden + r];
      const double want = cpu[i++];
      const double rel = std::fabs(gpu - want) / std::max(std::fabs(want), rms);
      worst = std::isfinite(rel) ? std::max(worst, rel) : INFINITY;
    }
  }
  const bool ok = worst <= kTrustedTolerance;
  std::printf(
      "  trusted GPU path vs CPU (double) at %zu elements: max "
      "|d|/max(|cpu|,rms) = %.2e "
      "(bound %.0e): %s\n",
      cpu.size(), worst, kTrustedTolerance, ok ? "ok" : "WRONG");
  return ok;
}

// One batch under one routing: the trusted output (checked against the CPU),
// then every configuration that takes the batch. False when no trusted path
// ran.
bool RunBatch(const Flags& f, const MoeProblem& p, const std::string& routing,
              double bw, bool* header, Totals* totals) {
  std::vector<float> ref;
  int distinct = 0;
  if (!TrustedOutput(f, p, &ref, &distinct)) return false;
  std::printf("batch %d, %s routing: %d distinct routed experts\n", p.batch,
              routing.c_str(), distinct);
  if (f.cpu_check && !CheckTrusted(f, p, ref)) ++totals->wrong_configs;
  if (!*header) PrintHeader();
  *header = true;
  for (const Config& c : Configs(f)) {
    if (!TakesBatch(c.backend, p.batch)) continue;  // fused_gemv_fp8: 1
    RunConfig(f, p, c, bw, ref, totals);
  }
  return true;
}

void PrintDevice(const DeviceInfo& d) {
  std::printf(
      "device %d: %s, sm_%d%d, %d SMs, %.1f GiB, SM clock %d MHz, memory clock "
      "%d MHz, "
      "driver %d, runtime %d\n",
      d.ordinal, d.name.c_str(), d.sm_major, d.sm_minor, d.sm_count,
      d.memory_bytes / 1073741824.0, d.sm_clock_mhz, d.mem_clock_mhz,
      d.driver_version, d.runtime_version);
  for (const backends::BackendDescriptor* b : backends::AllBackends()) {
    if (!b->is_gpu()) continue;
    const std::string name(b->name);
    const BackendAvailability a = ProbeMoeBackend(name, d.ordinal);
    std::printf("  probe %-15s %-11s %s\n", name.c_str(),
                a.available ? "available" : "UNAVAILABLE", a.reason.c_str());
  }
}

int Main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    if (!ParseFlag(argv[i], &f)) {
      std::fprintf(
          stderr,
          "unknown flag %s (see the header of kernels/cuda/bench/bench.cc)\n",
          argv[i]);
      return 2;
    }
  }
  const DeviceInfo d = QueryDevice(f.device);
  if (!d.present) {
    std::printf("no GPU: %s\n", d.error.c_str());
    return 2;
  }
  std::string error;
  const double bw = MeasureReadBandwidthGBps(f.device, &error);
  std::printf("measured streaming read bandwidth: %.0f GB/s%s%s\n", bw,
              error.empty() ? "" : " ", error.c_str());
  if (bw <= 0) return 2;
  PrintDevice(d);
  const MoeDims dims = Dims(f.tiny);
  std::printf(
      "dims: hidden %d, moe_inter %d, experts %d, top_k %d, shared %d, scaling "
      "%.2f; "
      "seed %llu, layer %d; pass: rel_l2 <= %.0e and every element within %.0e "
      "of "
      "max(|ref|, rms(ref))\n",
      dims.hidden, dims.moe_inter, dims.num_experts, dims.top_k,
      dims.num_shared, dims.routed_scaling,
      static_cast<unsigned long long>(f.seed), f.layer, kTolerance, kTolerance);
  if (f.chain > 1) {
    std::printf(
        "timing: layers %d..%d back to back (each its own weights, the L2 "
        "flushed before the first), figures per layer, every layer "
        "checked\n",
        f.layer, f.layer + f.chain - 1);
  }
  Totals totals;
  bool header = false;
  for (const std::string& routing : f.routings) {
    for (int batch : f.batches) {
      if (!RunBatch(f, MakeProblem(f, batch, routing), routing, bw, &header,
                    &totals)) {
        return 2;
      }
    }
  }
  std::printf("summary: %d wrong, %d CUDA errors\n", totals.wrong_configs,
              totals.errors);
  return totals.wrong_configs > 0 || totals.errors > 0 ? 1 : 0;
}

}  // namespace
}  // namespace moetune::gpu

int main(int argc, char** argv) { return moetune::gpu::Main(argc, argv); }
