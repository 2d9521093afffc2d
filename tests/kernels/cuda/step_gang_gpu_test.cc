// The decode step with real communication (StepRunOptions::comm): a gang of
// rank processes, each running its shard, summing every block's output over
// the gang and gathering the best tokens, computes the whole model's step.
// On one GPU: a world-1 NCCL communicator in process (the same code path as
// a gang's), and gangs of two and four processes on the one device through
// the one-shot all-reduce (NCCL refuses two ranks on one device), their
// rendezvous a directory. Each rank's logits slice is checked against the
// unsharded CPU reference's, and its tokens against the reference's argmax.
// Data-parallel attention the same way: each rank its own sequences, the
// MoE layers' inputs all-gathered and outputs reduce-scattered (one-shot
// over processes; NCCL and one-shot at world 1). GPU cases skip without a
// device.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/comm/comm_gpu.h"
#include "kernels/cuda/step/step_gpu.h"
#include "kernels/cuda/step/step_problem.h"
#include "kernels/reference/decode_step.h"

extern char** environ;

namespace moetune::gpu {
namespace {

namespace fs = std::filesystem;

#define SKIP_WITHOUT_GPU() \
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

constexpr double kTolerance = 2e-2;
constexpr char kChildTest[] = "StepGangGpuTest.DISABLED_OneRankOfAGang";

ref::StepSpec Spec(ref::Shard shard, int batch = 3) {
  ref::StepSpec spec;
  spec.config = *model::FindPreset("tiny");
  spec.layers = 4;
  spec.batch = batch;
  spec.context = 40;
  spec.seed = 11;
  spec.shard = shard;
  return spec;
}

double RelL2(const std::vector<float>& got, const float* want, size_t n) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; ++i) {
    diff += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
    norm += double{want[i]} * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFileAtomically(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = path.string() + ".tmp";
  std::ofstream(tmp, std::ios::binary) << bytes;
  fs::rename(tmp, path);
}

// A gang's rendezvous through a directory: rank r's offer under `key` is the
// file key.r; every rank waits (at most 60 s) for all of them.
AllGatherBytes DirectoryRendezvous(const fs::path& dir, int rank, int world) {
  return [=](const std::string& key, const std::string& mine,
             std::vector<std::string>* all, std::string* error) {
    WriteFileAtomically(dir / (key + "." + std::to_string(rank)), mine);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(60);
    all->assign(world, "");
    for (int r = 0; r < world; ++r) {
      const fs::path theirs = dir / (key + "." + std::to_string(r));
      while (!fs::exists(theirs)) {
        if (std::chrono::steady_clock::now() > deadline) {
          *error = "rank " + std::to_string(r) + " never offered " + key;
          return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      (*all)[r] = ReadFile(theirs);
    }
    return true;
  };
}

// The child: rank MOETUNE_GANG_RANK of the gang described by the
// environment runs its step and leaves its logits and tokens in the
// directory.
TEST(StepGangGpuTest, DISABLED_OneRankOfAGang) {
  const char* dir_env = std::getenv("MOETUNE_GANG_DIR");
  if (dir_env == nullptr) GTEST_SKIP() << "run by GangsComputeTheWholeModel";
  const fs::path dir = dir_env;
  const int rank = std::atoi(std::getenv("MOETUNE_GANG_RANK"));
  const int tp = std::atoi(std::getenv("MOETUNE_GANG_TP"));
  const int ep = std::atoi(std::getenv("MOETUNE_GANG_EP"));
  const bool graph = std::string(std::getenv("MOETUNE_GANG_GRAPH")) == "1";
  const bool dp = std::string(std::getenv("MOETUNE_GANG_DP")) == "1";
  const int batch = std::atoi(std::getenv("MOETUNE_GANG_BATCH"));
  GangCommSetup setup;
  setup.rank = rank;
  setup.world = tp * ep;
  setup.impl = AllReduceImpl::kOneShot;
  setup.timeout_ms = 60000;
  std::string error;
  auto comm =
      CreateGangComm(setup, DirectoryRendezvous(dir, rank, tp * ep), &error);
  ASSERT_NE(comm, nullptr) << error;
  StepRunOptions o;
  o.backend = "fused_gemv";
  o.cuda_graph = graph;
  o.warmup = 2;
  o.iterations = 5;
  o.comm = comm.get();
  const StepProblem p = MakeStepProblem(Spec({tp, ep, rank, dp}, batch));
  const StepRunResult r = RunDecodeStep(p, o);
  ASSERT_EQ(r.status, RunStatus::kOk) << r.message;
  EXPECT_GT(r.comm_us, 0);
  // tp attention: two sums a layer and the tokens' gather; dp: an
  // all-gather and a reduce-scatter a MoE layer.
  EXPECT_EQ(r.collectives_per_step,
            dp ? 2 * (p.layers - p.dims.num_dense_layers) : 2 * p.layers + 1);
  std::string out(reinterpret_cast<const char*>(r.timed_logits.data()),
                  r.timed_logits.size() * sizeof(float));
  for (int token : r.next_tokens) out += std::to_string(token) + " ";
  WriteFileAtomically(dir / ("result." + std::to_string(rank)), out);
}

// Spawns the gang's ranks (this test binary running the child test) and
// waits for them; true if every rank exited 0.
bool RunGang(const fs::path& dir, int tp, int ep, bool graph, bool dp = false,
             int batch = 3) {
  std::vector<pid_t> pids;
  for (int rank = 0; rank < tp * ep; ++rank) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    env.push_back("MOETUNE_GANG_DIR=" + dir.string());
    env.push_back("MOETUNE_GANG_RANK=" + std::to_string(rank));
    env.push_back("MOETUNE_GANG_TP=" + std::to_string(tp));
    env.push_back("MOETUNE_GANG_EP=" + std::to_string(ep));
    env.push_back(std::string("MOETUNE_GANG_GRAPH=") + (graph ? "1" : "0"));
    env.push_back(std::string("MOETUNE_GANG_DP=") + (dp ? "1" : "0"));
    env.push_back("MOETUNE_GANG_BATCH=" + std::to_string(batch));
    std::vector<std::string> args = {
        "/proc/self/exe", std::string("--gtest_filter=") + kChildTest,
        "--gtest_also_run_disabled_tests"};
    std::vector<char*> argv, envp;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(),
                    envp.data()) != 0) {
      return false;
    }
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok;
}

TEST(StepGangGpuTest, GangsOfProcessesComputeTheWholeModel) {
  SKIP_WITHOUT_GPU();
  const ref::StepSpec whole = Spec({1, 1, 0});
  const auto want = ref::DecodeStep(whole, ref::Bf16InputReferenceMoe(whole));
  ASSERT_TRUE(want.ok()) << want.status();
  const int vocab = whole.config.vocab;
  for (auto [tp, ep, graph] : {std::tuple{2, 1, true}, std::tuple{1, 2, false},
                               std::tuple{2, 2, true}}) {
    SCOPED_TRACE(::testing::Message()
                 << "tp " << tp << " ep " << ep << " graph " << graph);
    const fs::path dir = fs::temp_directory_path() /
                         ("moetune_gang_" + std::to_string(getpid()) + "_" +
                          std::to_string(tp) + std::to_string(ep));
    fs::remove_all(dir);
    fs::create_directories(dir);
    ASSERT_TRUE(RunGang(dir, tp, ep, graph)) << "a rank failed";
    const int slice = vocab / (tp * ep);
    for (int rank = 0; rank < tp * ep; ++rank) {
      const std::string out =
          ReadFile(dir / ("result." + std::to_string(rank)));
      const size_t floats = size_t{3} * slice;
      ASSERT_GE(out.size(), floats * sizeof(float)) << "rank " << rank;
      std::vector<float> logits(floats);
      std::memcpy(logits.data(), out.data(), floats * sizeof(float));
      std::vector<float> expect;
      for (int b = 0; b < 3; ++b) {
        const float* row = want->data() + size_t(b) * vocab + rank * slice;
        expect.insert(expect.end(), row, row + slice);
      }
      EXPECT_LT(RelL2(logits, expect.data(), floats), kTolerance)
          << "rank " << rank;
      std::string tokens;
      for (int b = 0; b < 3; ++b) {
        const float* row = want->data() + size_t(b) * vocab;
        tokens +=
            std::to_string(std::max_element(row, row + vocab) - row) + " ";
      }
      EXPECT_EQ(out.substr(floats * sizeof(float)), tokens) << "rank " << rank;
    }
    fs::remove_all(dir);
  }
}

// Data-parallel attention: each rank decodes its own sequences of the
// batch with the whole attention, its MoE layers over every rank's tokens
// gathered, their partial outputs reduce-scattered back (one-shot kernel,
// ranks as processes on one device): every rank's logits are the whole
// model's of its own sequences.
TEST(StepGangGpuTest, DataParallelGangsOfProcessesComputeTheWholeModel) {
  SKIP_WITHOUT_GPU();
  const ref::StepSpec whole = Spec({1, 1, 0}, 4);
  const auto want = ref::DecodeStep(whole, ref::Bf16InputReferenceMoe(whole));
  ASSERT_TRUE(want.ok()) << want.status();
  const size_t vocab = whole.config.vocab;
  for (auto [tp, ep, graph] :
       {std::tuple{1, 2, true}, std::tuple{2, 2, false}}) {
    SCOPED_TRACE(::testing::Message()
                 << "tp " << tp << " ep " << ep << " graph " << graph);
    const fs::path dir = fs::temp_directory_path() /
                         ("moetune_dp_gang_" + std::to_string(getpid()) + "_" +
                          std::to_string(tp) + std::to_string(ep));
    fs::remove_all(dir);
    fs::create_directories(dir);
    ASSERT_TRUE(RunGang(dir, tp, ep, graph, true, 4)) << "a rank failed";
    const int own = 4 / (tp * ep);
    for (int rank = 0; rank < tp * ep; ++rank) {
      const std::string out =
          ReadFile(dir / ("result." + std::to_string(rank)));
      const size_t floats = own * vocab;
      ASSERT_GE(out.size(), floats * sizeof(float)) << "rank " << rank;
      std::vector<float> logits(floats);
      std::memcpy(logits.data(), out.data(), floats * sizeof(float));
      const float* rows = want->data() + rank * floats;
      EXPECT_LT(RelL2(logits, rows, floats), kTolerance) << "rank " << rank;
      std::string tokens;
      for (int b = 0; b < own; ++b) {
        const float* row = rows + b * vocab;
        tokens +=
            std::to_string(std::max_element(row, row + vocab) - row) + " ";
      }
      EXPECT_EQ(out.substr(floats * sizeof(float)), tokens) << "rank " << rank;
    }
    fs::remove_all(dir);
  }
}

// World 1 through NCCL: the communicator a gang of one makes, summing
// every block (nothing to add) and gathering its own token; the step equals
// the step without communication.
TEST(StepGangGpuTest, AWorldOneNcclGangRunsTheSameStep) {
  SKIP_WITHOUT_GPU();
  std::string id, error;
  ASSERT_EQ(NewNcclId(&id, &error), RunStatus::kOk) << error;
  GangCommSetup setup;
  setup.nccl_id = id;
  auto alone = [](const std::string&, const std::string& mine,
                  std::vector<std::string>* all, std::string*) {
    *all = {mine};
    return true;
  };
  auto comm = CreateGangComm(setup, alone, &error);
  ASSERT_NE(comm, nullptr) << error;
  StepRunOptions o;
  // A backend that combines the experts in a fixed order: with fused_gemv's
  // float atomics two runs of one step differ in the last bits, and where
  // that tips an indexer or router near-tie, by more (1.4e-4).
  o.backend = "grouped_mma";
  o.cuda_graph = true;
  o.warmup = 1;
  o.iterations = 3;
  const StepProblem p = MakeStepProblem(Spec({1, 1, 0}));
  const StepRunResult plain = RunDecodeStep(p, o);
  o.comm = comm.get();
  const StepRunResult ganged = RunDecodeStep(p, o);
  ASSERT_EQ(plain.status, RunStatus::kOk) << plain.message;
  ASSERT_EQ(ganged.status, RunStatus::kOk) << ganged.message;
  // A world-1 sum is the identity: the same bits.
  EXPECT_EQ(RelL2(ganged.logits, plain.logits.data(), plain.logits.size()),
            0.0);
  EXPECT_EQ(RelL2(ganged.timed_logits, plain.timed_logits.data(),
                  plain.timed_logits.size()),
            0.0);
  EXPECT_EQ(ganged.next_tokens, plain.next_tokens);
  EXPECT_EQ(ganged.collectives_per_step, 9);
  EXPECT_GT(ganged.comm_us, 0);
}

// Data-parallel attention through world-1 gangs, NCCL's and the one-shot
// kernel's: each MoE layer's input all-gathered and output reduce-scattered
// (over one rank: copies), the same bits as the step without communication.
TEST(StepGangGpuTest, AWorldOneGangRunsDataParallelAttention) {
  SKIP_WITHOUT_GPU();
  std::string id, error;
  ASSERT_EQ(NewNcclId(&id, &error), RunStatus::kOk) << error;
  auto alone = [](const std::string&, const std::string& mine,
                  std::vector<std::string>* all, std::string*) {
    *all = {mine};
    return true;
  };
  StepRunOptions o;
  o.backend = "grouped_mma";  // a fixed combining order (see above)
  o.cuda_graph = true;
  o.warmup = 1;
  o.iterations = 3;
  const StepProblem p = MakeStepProblem(Spec({1, 1, 0, true}));
  ASSERT_TRUE(p.dp_attention);
  const StepRunResult plain = RunDecodeStep(p, o);
  ASSERT_EQ(plain.status, RunStatus::kOk) << plain.message;
  for (AllReduceImpl impl : {AllReduceImpl::kNccl, AllReduceImpl::kOneShot}) {
    SCOPED_TRACE(AllReduceImplName(impl));
    GangCommSetup setup;
    setup.nccl_id = id;
    setup.impl = impl;
    auto comm = CreateGangComm(setup, alone, &error);
    ASSERT_NE(comm, nullptr) << error;
    o.comm = comm.get();
    const StepRunResult ganged = RunDecodeStep(p, o);
    ASSERT_EQ(ganged.status, RunStatus::kOk) << ganged.message;
    EXPECT_EQ(RelL2(ganged.logits, plain.logits.data(), plain.logits.size()),
              0.0);
    EXPECT_EQ(ganged.next_tokens, plain.next_tokens);
    const int moe_layers = p.layers - p.dims.num_dense_layers;
    EXPECT_EQ(ganged.collectives_per_step, 2 * moe_layers);
    EXPECT_GT(ganged.comm_us, 0);
  }
}

TEST(StepGangGpuTest, AGangOfTheWrongSizeIsRefusedNamingIt) {
  SKIP_WITHOUT_GPU();
  std::string error;
  auto gang = CreateLocalGang({0, 0}, AllReduceImpl::kOneShot, 1024, &error);
  ASSERT_EQ(gang.size(), 2u) << error;
  StepRunOptions o;
  o.backend = "fused_gemv";
  o.comm = gang[0].get();
  const StepRunResult r = RunDecodeStep(MakeStepProblem(Spec({1, 1, 0})), o);
  EXPECT_NE(r.status, RunStatus::kOk);
  EXPECT_NE(r.message.find("options.comm"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace moetune::gpu
