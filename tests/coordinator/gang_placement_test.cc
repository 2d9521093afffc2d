// Gang placement as pure functions: who forms a gang, and why none can.
#include "coordinator/gang_placement.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backends/registry.h"

namespace moetune::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

GangCandidate Gpu(const std::string& id, const std::string& host,
                  int64_t idle_since_ms = 0, bool idle = true) {
  GangCandidate c;
  c.worker_id = id;
  c.host_id = host;
  c.is_gpu = true;
  c.has_backend = true;
  c.idle = idle;
  c.idle_since_ms = idle_since_ms;
  return c;
}

TEST(PlaceGangTest, TheAskerAndItsHostsLongestWaiting) {
  const std::vector<GangCandidate> others = {
      Gpu("a1", "a", 30), Gpu("a2", "a", 10), Gpu("a3", "a", 20),
      Gpu("b1", "b", 0), Gpu("a4", "a", 5, /*idle=*/false)};
  EXPECT_THAT(PlaceGang(Gpu("a0", "a"), others, 3),
              ElementsAre("a0", "a2", "a3"));
  EXPECT_THAT(PlaceGang(Gpu("a0", "a"), others, 8), IsEmpty());  // whole
}

TEST(PlaceGangTest, TheHostWithTheMostIdleWorkersThenTheAskers) {
  const std::vector<GangCandidate> others = {
      Gpu("a1", "a", 30), Gpu("b1", "b", 40), Gpu("b2", "b", 10),
      Gpu("b3", "b", 20)};
  // b has 3 idle, a 2 (with the asker): b, its longest waiting first.
  EXPECT_THAT(PlaceGang(Gpu("a0", "a"), others, 2), ElementsAre("b2", "b3"));
  // A tie goes to the asker's host.
  EXPECT_THAT(
      PlaceGang(Gpu("a0", "a"),
                {Gpu("a1", "a"), Gpu("b1", "b", 0), Gpu("b2", "b", 0)}, 2),
      ElementsAre("a0", "a1"));
}

TEST(PlaceGangTest, NeverCpuWorkersOrWorkersWithoutTheBackend) {
  GangCandidate cpu = Gpu("c", "a");
  cpu.is_gpu = false;
  GangCandidate without = Gpu("w", "a");
  without.has_backend = false;
  EXPECT_THAT(PlaceGang(cpu, {Gpu("a1", "a")}, 2), IsEmpty());
  EXPECT_THAT(PlaceGang(Gpu("a0", "a"), {cpu, without}, 2), IsEmpty());
  EXPECT_THAT(PlaceGang(Gpu("a0", ""), {Gpu("a1", "")}, 2), IsEmpty());
}

TEST(GangShortfallTest, SaysWhyNoHostCanServe) {
  GangCandidate cpu = Gpu("c", "a");
  cpu.is_gpu = false;
  EXPECT_EQ(GangShortfall({cpu}, "fused_gemv", "", 2),
            "MEASURED communication needs GPU workers; the live workers are "
            "all CPU workers");
  const std::string cpu_refusal = GangBackendRefusal(
      "cpu_reference", backends::FindBackend("cpu_reference"));
  EXPECT_EQ(cpu_refusal,
            "MEASURED communication needs a GPU backend with NCCL; "
            "cpu_reference runs on the CPU");
  EXPECT_EQ(GangShortfall({Gpu("a0", "a")}, "cpu_reference", cpu_refusal, 2),
            cpu_refusal);
  EXPECT_EQ(GangBackendRefusal("torch_grouped_bf16", nullptr),
            "MEASURED communication needs a native GPU backend with NCCL; "
            "torch_grouped_bf16 is an out-of-process backend, which runs one "
            "rank's shard");
  EXPECT_EQ(
      GangBackendRefusal("fused_gemv", backends::FindBackend("fused_gemv")),
      "");
  EXPECT_EQ(GangShortfall({Gpu("a0", "a"), Gpu("a1", "a"), Gpu("b0", "b")},
                          "fused_gemv", "", 8),
            "needs 8 GPU workers with fused_gemv on one host; the largest "
            "host has 2");
  // Busy workers still count: the gang can form once they are free.
  EXPECT_EQ(GangShortfall({Gpu("a0", "a", 0, false), Gpu("a1", "a")},
                          "fused_gemv", "", 2),
            "");
  EXPECT_EQ(GangShortfall({}, "fused_gemv", "", 2), "");  // nobody yet
}

}  // namespace
}  // namespace moetune::coordinator
