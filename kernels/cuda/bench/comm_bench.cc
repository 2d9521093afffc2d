// moetune-comm-bench: both all-reduce implementations of
// kernels/cuda/comm/comm_gpu.h in the style of nccl-tests: for each message
// size, the time of one sum (each rank on a thread of its own, the slowest
// rank's figure), algbw = bytes / time, busbw = algbw * 2 (W - 1) / W, and
// #wrong (elements that differ from the exact sum of rank-dependent data).
// --ops adds data-parallel attention's all-gather and reduce-scatter (size =
// all ranks' parts, as nccl-tests counts them; busbw = algbw * (W - 1) / W;
// #wrong against the exact gather and sums). Then the
// same sums replayed from one CUDA graph at --graph_bytes (a decode step's
// all-reduce: 6144 BF16 activations are 12 KB). Exits 1 on a wrong result,
// 2 on a setup failure.
//
//   moetune-comm-bench [--gpus=N] [--ranks_per_gpu=1|2] [--impl=nccl,oneshot]
//       [--min_bytes=1024] [--max_bytes=67108864] [--iterations=50]
//       [--warmup=10] [--graph_bytes=12288,24576] [--json=FILE]
//       [--calibration=FILE] [--ops=allreduce,allgather,reducescatter]
// --calibration writes the communication model's parameters fitted to these
// figures (a CommCalibration in protobuf's JSON mapping, with the machine's
// fingerprint) for a worker's --comm_calibration: per implementation, the
// latency (the median time of messages up to 32 KB) and the bus bandwidth
// (busbw of the largest message), and the fit's worst error over the sizes;
// a graph fit per --graph_bytes run (latency only); for each collective of
// --ops its own (common/comm/comm_fit.h, whose fits the model prices each by).
// Several ranks a GPU run the one-shot path only (NCCL refuses them): on one
// GPU they exercise its synchronisation where NCCL can only run world 1.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/comm/comm_fit.h"
#include "google/protobuf/util/json_util.h"
#include "kernels/cuda/bench/bench_flags.h"
#include "kernels/cuda/comm/comm_gpu.h"
#include "kernels/cuda/moe/moe_gpu.h"
#include "proto/moetune.pb.h"

namespace moetune::gpu {
namespace {

struct Flags {
  int gpus = 0, ranks_per_gpu = 1, iterations = 50, warmup = 10;
  int64_t min_bytes = 1024, max_bytes = int64_t{64} << 20;
  std::vector<std::string> impls = {"nccl", "oneshot"};
  std::vector<std::string> ops = {"allreduce"};
  std::vector<int64_t> graph_bytes = {12288, 24576};
  std::string json, calibration;
};

bool ParseFlag(const std::string& arg, Flags* f) {
  const size_t eq = arg.find('=');
  if (arg.rfind("--", 0) != 0 || eq == std::string::npos) return false;
  const std::string key = arg.substr(2, eq - 2), value = arg.substr(eq + 1);
  const int64_t number = std::atoll(value.c_str());
  if (key == "gpus")
    f->gpus = static_cast<int>(number);
  else if (key == "ranks_per_gpu")
    f->ranks_per_gpu = static_cast<int>(number);
  else if (key == "iterations")
    f->iterations = static_cast<int>(number);
  else if (key == "warmup")
    f->warmup = static_cast<int>(number);
  else if (key == "min_bytes")
    f->min_bytes = number;
  else if (key == "max_bytes")
    f->max_bytes = number;
  else if (key == "impl")
    f->impls = SplitList(value);
  else if (key == "ops")
    f->ops = SplitList(value);
  else if (key == "json")
    f->json = value;
  else if (key == "calibration")
    f->calibration = value;
  else if (key == "graph_bytes") {
    f->graph_bytes.clear();
    for (const std::string& s : SplitList(value)) {
      f->graph_bytes.push_back(std::atoll(s.c_str()));
    }
  } else {
    return false;
  }
  return true;
}

// "allreduce", "allgather" or "reducescatter"; false for anything else.
bool ParseOp(const std::string& name, CollectiveOp* op) {
  if (name == "allreduce")
    *op = CollectiveOp::kAllReduce;
  else if (name == "allgather")
    *op = CollectiveOp::kAllGather;
  else if (name == "reducescatter")
    *op = CollectiveOp::kReduceScatter;
  else
    return false;
  return true;
}

struct Row {
  std::string impl;
  std::string op = "allreduce";
  int world = 1;
  int64_t bytes = 0;
  bool in_graph = false;
  double time_us = 0;
  int64_t wrong = 0;
  std::string error;
};

// Every rank on its own thread, at once; the slowest rank's time.
Row Measure(std::vector<std::unique_ptr<GangComm>>& gang,
            const std::string& op_name, int64_t bytes, bool in_graph,
            const Flags& f) {
  const int world = static_cast<int>(gang.size());
  CollectiveOp op = CollectiveOp::kAllReduce;
  ParseOp(op_name, &op);
  // A gather's or scatter's size is every rank's part together.
  const int64_t floats =
      op == CollectiveOp::kAllReduce ? bytes / 4 : bytes / 4 / world;
  std::vector<AllReduceTiming> timings(world);
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  std::barrier meet(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      TimeCollective(
          gang[r].get(), op, floats, f.warmup, f.iterations, in_graph,
          [&] { meet.arrive_and_wait(); }, &timings[r], &errors[r]);
    });
  }
  for (std::thread& t : threads) t.join();
  Row row{AllReduceImplName(gang[0]->impl()), op_name, world, bytes, in_graph};
  for (int r = 0; r < world; ++r) {
    row.time_us = std::max(row.time_us, timings[r].time_us);
    row.wrong += timings[r].wrong;
    if (!errors[r].empty() && row.error.empty()) {
      row.error = "rank " + std::to_string(r) + ": " + errors[r];
    }
  }
  return row;
}

void Print(const Row& row, FILE* json) {
  const double algbw = row.bytes / (row.time_us * 1e3);  // GB/s
  const double factor = row.op == "allreduce" ? 2.0 : 1.0;
  const double busbw = algbw * factor * (row.world - 1) / row.world;
  std::printf("%-8s %-13s %5d %12lld %6s %11.2f %10.2f %10.2f %7lld %s\n",
              row.impl.c_str(), row.op.c_str(), row.world,
              static_cast<long long>(row.bytes),
              row.in_graph ? "graph" : "stream", row.time_us, algbw, busbw,
              static_cast<long long>(row.wrong), row.error.c_str());
  if (json == nullptr) return;
  std::fprintf(json,
               "{\"impl\":\"%s\",\"op\":\"%s\",\"world\":%d,\"bytes\":%lld,"
               "\"graph\":%s,"
               "\"time_us\":%.3f,\"algbw_gbps\":%.3f,\"busbw_gbps\":%.3f,"
               "\"wrong\":%lld}\n",
               row.impl.c_str(), row.op.c_str(), row.world,
               static_cast<long long>(row.bytes),
               row.in_graph ? "true" : "false", row.time_us, algbw, busbw,
               static_cast<long long>(row.wrong));
}

// One implementation over every size, then inside a graph; false on a
// wrong sum or an error.
bool RunImpl(const std::string& name, const std::vector<int>& devices,
             const Flags& f, FILE* json, std::vector<Row>* rows) {
  AllReduceImpl impl;
  if (!ParseAllReduceImpl(name, &impl)) {
    std::fprintf(stderr, "--impl: '%s' is not nccl or oneshot\n", name.c_str());
    return false;
  }
  std::string error;
  auto gang = CreateLocalGang(devices, impl, f.max_bytes / 4, &error);
  if (gang.empty()) {
    std::printf("%-8s %5zu  skipped: %s\n", name.c_str(), devices.size(),
                error.c_str());
    return true;
  }
  bool ok = true;
  auto report = [&](const Row& row) {
    Print(row, json);
    rows->push_back(row);
    ok = ok && row.wrong == 0 && row.error.empty();
  };
  for (const std::string& op : f.ops) {
    for (int64_t bytes = f.min_bytes; bytes <= f.max_bytes; bytes *= 2) {
      report(Measure(gang, op, bytes, false, f));
    }
    for (int64_t bytes : f.graph_bytes) {
      report(Measure(gang, op, bytes, true, f));
    }
  }
  return ok;
}

bool WriteCalibration(const std::vector<Row>& rows, int gpus,
                      const std::string& path) {
  v1::CommCalibration cal;
  const DeviceInfo info = QueryDevice(0);
  cal.mutable_fingerprint()->set_device_name(info.name);
  cal.mutable_fingerprint()->set_nccl_version(NcclVersion());
  cal.mutable_fingerprint()->set_sm_arch("sm_" + std::to_string(info.sm_major) +
                                         std::to_string(info.sm_minor));
  cal.set_gpus(gpus);
  cal.set_measured_at_unix_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  std::vector<comm::CollectiveSample> samples;
  for (const Row& r : rows) {
    if (r.wrong != 0 || !r.error.empty()) continue;  // not a measurement
    samples.push_back({r.impl, r.op, r.world, r.bytes, r.in_graph, r.time_us});
  }
  for (v1::CollectiveFit& fit : comm::FitCalibration(samples)) {
    *cal.add_fits() = std::move(fit);
  }
  std::string text;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(cal, &text, options).ok()) {
    return false;
  }
  std::ofstream(path) << text;
  std::printf("# calibration written to %s\n", path.c_str());
  return true;
}

int Main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    if (!ParseFlag(argv[i], &f)) {
      std::fprintf(stderr, "unknown flag %s (see the file's comment)\n",
                   argv[i]);
      return 2;
    }
  }
  for (const std::string& op : f.ops) {
    CollectiveOp parsed;
    if (!ParseOp(op, &parsed)) {
      std::fprintf(stderr,
                   "--ops: '%s' is not allowed; allowed: allreduce, allgather, "
                   "reducescatter\n",
                   op.c_str());
      return 2;
    }
  }
  const int gpus = f.gpus > 0 ? f.gpus : DeviceCount();
  if (f.ranks_per_gpu > 2) {
    // Threads of one process: their spinning kernels need to run at once,
    // which CUDA does not promise; at 4 a GPU they starve
    // (kernels/cuda/comm/PERF.md).
    std::fprintf(stderr,
                 "--ranks_per_gpu=%d: at most 2 (ranks sharing a GPU in one "
                 "process need their kernels to run at once)\n",
                 f.ranks_per_gpu);
    return 2;
  }
  if (gpus < 1 || gpus > DeviceCount() || f.ranks_per_gpu < 1) {
    std::fprintf(stderr, "--gpus=%d: this machine has %d GPUs\n", gpus,
                 DeviceCount());
    return 2;
  }
  std::vector<int> devices;
  for (int g = 0; g < gpus; ++g) {
    for (int k = 0; k < f.ranks_per_gpu; ++k) devices.push_back(g);
  }
  FILE* json = f.json.empty() ? nullptr : std::fopen(f.json.c_str(), "w");
  std::printf("# NCCL %s, %d GPU(s), %d rank(s) a GPU\n", NcclVersion().c_str(),
              gpus, f.ranks_per_gpu);
  std::printf("%-8s %-13s %5s %12s %6s %11s %10s %10s %7s\n", "# impl", "op",
              "world", "size(B)", "where", "time(us)", "algbw", "busbw",
              "#wrong");
  bool ok = true;
  std::vector<Row> rows;
  for (const std::string& impl : f.impls) {
    ok = RunImpl(impl, devices, f, json, &rows) && ok;
  }
  if (json != nullptr) std::fclose(json);
  if (!f.calibration.empty() && !WriteCalibration(rows, gpus, f.calibration)) {
    return 2;
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace moetune::gpu

int main(int argc, char** argv) { return moetune::gpu::Main(argc, argv); }
