// The kernel timeline's summary (kernels/profiling/kernel_timeline.h) on
// hand-made spans whose unions, idle times and shares are worked out in the
// comments, and its CSV written and read back
// (kernels/profiling/kernel_timeline_csv.h).
#include "kernels/profiling/kernel_timeline.h"

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/profiling/kernel_timeline_csv.h"

namespace moetune::profiling {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(KernelBaseNameTest, DropsReturnTypeNamespacesTemplatesAndParameters) {
  EXPECT_EQ(KernelBaseName("void moetune::gpu::(anonymous "
                           "namespace)::GemvBf16MmaKernel<4, 128>(moetune::"
                           "gpu::GemvArgs const*, int)"),
            "GemvBf16MmaKernel");
  EXPECT_EQ(KernelBaseName("void (anonymous namespace)::Local()"), "Local");
  EXPECT_EQ(KernelBaseName("unsigned int moetune::Count<int>(int)"), "Count");
  EXPECT_EQ(KernelBaseName("GemvKernel(float*)"), "GemvKernel");
}

TEST(KernelBaseNameTest, TemplateArgumentsWithParenthesesAndComparisons) {
  EXPECT_EQ(KernelBaseName("void cutlass::device_kernel<cutlass::Gemm<("
                           "cutlass::Mode)1, std::pair<int, int> > >("
                           "cutlass::Params)"),
            "device_kernel");
  EXPECT_EQ(KernelBaseName("void Fits<(1 > 2), (3 < 4)>(int)"), "Fits");
  EXPECT_EQ(KernelBaseName(
                "void at::native::elementwise_kernel<128, 4, "
                "at::native::Impl<F>(at::Iter&, F const&)::{lambda(int)#1}>("
                "int, at::native::Impl<F>::{lambda(int)#1})"),
            "elementwise_kernel");
  EXPECT_EQ(KernelBaseName("ncclDevKernel_AllReduce_Sum_f32_RING_LL("
                           "ncclDevKernelArgsStorage<4096ul>)"),
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
}

TEST(KernelBaseNameTest, PlainAndUndemangledNamesComeBackWhole) {
  EXPECT_EQ(KernelBaseName("my_c_kernel"), "my_c_kernel");
  EXPECT_EQ(KernelBaseName("_Z3fooPf"), "_Z3fooPf");
  EXPECT_EQ(KernelBaseName(""), "");
  // Nothing before the parameter list: the input, not an empty key.
  EXPECT_EQ(KernelBaseName("(int)"), "(int)");
}

TEST(IntervalTest, GapsCountNothing) {
  const std::vector<Interval> intervals = {{0, 10}, {20, 25}};
  EXPECT_EQ(UnionLengthNs(intervals), 15u);
  EXPECT_THAT(ExclusiveLengthsNs(intervals), ElementsAre(10u, 5u));
}

TEST(IntervalTest, OverlapCountsOnceAndGoesToTheEarlierStart) {
  // Given out of order: [0, 25) started first and owns [20, 25).
  const std::vector<Interval> intervals = {{20, 30}, {0, 25}};
  EXPECT_EQ(UnionLengthNs(intervals), 30u);
  EXPECT_THAT(ExclusiveLengthsNs(intervals), ElementsAre(5u, 25u));
}

TEST(IntervalTest, NestedIntervalsAddNothing) {
  const std::vector<Interval> intervals = {
      {0, 100}, {10, 20}, {30, 40}, {95, 130}};
  EXPECT_EQ(UnionLengthNs(intervals), 130u);
  EXPECT_THAT(ExclusiveLengthsNs(intervals), ElementsAre(100u, 0u, 0u, 30u));
}

TEST(IntervalTest, TouchingSameStartEmptyAndInverted) {
  EXPECT_EQ(UnionLengthNs({{0, 10}, {10, 20}}), 20u);
  // Same start: the first given owns the overlap.
  EXPECT_THAT(ExclusiveLengthsNs({{0, 10}, {0, 30}}), ElementsAre(10u, 20u));
  EXPECT_THAT(ExclusiveLengthsNs({{5, 5}, {9, 3}, {0, 4}}),
              ElementsAre(0u, 0u, 4u));
  EXPECT_EQ(UnionLengthNs({}), 0u);
}

// One launch's spans: (name, start, end) offsets from `base_ns`.
struct Kernel {
  std::string name;
  uint64_t start;
  uint64_t end;
};

void AddLaunch(uint32_t launch_id, uint32_t graph_id, uint64_t base_ns,
               const std::vector<Kernel>& kernels,
               std::vector<KernelSpan>& spans) {
  for (const Kernel& k : kernels) {
    spans.push_back(
        {k.name, base_ns + k.start, base_ns + k.end, launch_id, graph_id});
  }
}

const char kGemv1[] = "void moetune::Gemv<1>(int)";
const char kGemv2[] = "void moetune::Gemv<2>(int)";
const char kNorm[] = "void moetune::(anonymous namespace)::Norm(float*)";

// Three timed replays of graph 7: two Gemvs overlapping by 10 ns (PDL),
// then Norm after a gap of 50, 60 and 100 ns. Each is busy 100 + 100 + 50
// = 250 ns; spans 300, 310, 350.
std::vector<KernelSpan> TimedReplays() {
  std::vector<KernelSpan> spans;
  const uint64_t norm_start[] = {250, 260, 300};
  for (uint32_t i = 0; i < 3; ++i) {
    AddLaunch(10 + i, 7, 1000 * (i + 1),
              {{kGemv1, 0, 100},
               {kGemv2, 90, 200},
               {kNorm, norm_start[i], norm_start[i] + 50}},
              spans);
  }
  return spans;
}

TEST(StatsByLaunchTest, SpanBusyAndIdleInStartOrder) {
  std::vector<KernelSpan> spans = TimedReplays();
  AddLaunch(3, 0, 500, {{"Eager(int)", 0, 40}}, spans);
  const std::vector<LaunchStats> launches = StatsByLaunch(spans);
  ASSERT_EQ(launches.size(), 4u);
  EXPECT_EQ(launches[0].launch_id, 3u);  // starts at 500, before the graphs
  EXPECT_EQ(launches[0].graph_id, 0u);
  EXPECT_EQ(launches[0].span_ns, 40u);
  EXPECT_EQ(launches[0].idle_ns(), 0u);
  EXPECT_EQ(launches[2].launch_id, 11u);
  EXPECT_EQ(launches[2].graph_id, 7u);
  EXPECT_EQ(launches[2].kernels, 3);
  EXPECT_EQ(launches[2].start_ns, 2000u);
  EXPECT_EQ(launches[2].span_ns, 310u);
  EXPECT_EQ(launches[2].busy_ns, 250u);
  EXPECT_EQ(launches[2].idle_ns(), 60u);
}

TEST(SummarizeTest, OnlyTheGraphsLaunchesOfItsModalKernelCount) {
  std::vector<KernelSpan> spans = TimedReplays();
  // Eager launches of the same kernels, a checked step of another shape
  // (graph 5, 2 kernels) and a one-off graph of 5 kernels: none summarised.
  AddLaunch(1, 0, 100, {{kGemv1, 0, 100}}, spans);
  AddLaunch(2, 0, 300, {{kNorm, 0, 50}}, spans);
  AddLaunch(4, 5, 500, {{kGemv1, 0, 100}, {kNorm, 200, 900}}, spans);
  AddLaunch(20, 9, 9000,
            {{kNorm, 0, 1},
             {kNorm, 1, 2},
             {kNorm, 2, 3},
             {kNorm, 3, 4},
             {kNorm, 4, 5}},
            spans);
  const TimelineSummary summary = Summarize(spans, 7);
  EXPECT_EQ(summary.all_launches, 7);
  EXPECT_EQ(summary.graph_id, 7u);
  EXPECT_EQ(summary.graph_launches, 5);
  EXPECT_EQ(summary.kernels_per_launch, 3);
  EXPECT_EQ(summary.launches, 3);
  EXPECT_DOUBLE_EQ(summary.median_span_ns, 310);
  EXPECT_DOUBLE_EQ(summary.median_idle_ns, 60);
  EXPECT_EQ(summary.total_span_ns, 960u);
  EXPECT_EQ(summary.total_busy_ns, 750u);
  EXPECT_DOUBLE_EQ(summary.idle_percent(), 100.0 * 210 / 960);
}

TEST(SummarizeTest, PerNameTableMergesInstantiations) {
  const TimelineSummary summary = Summarize(TimedReplays(), 7);
  ASSERT_EQ(summary.rows.size(), 2u);
  // Gemv<1> and Gemv<2>: 100 + 110 ns of durations a launch, of which the
  // 10 ns overlap goes to Gemv<1>: 200 ns exclusive, 600 of 750 busy.
  EXPECT_EQ(summary.rows[0].name, "Gemv");
  EXPECT_DOUBLE_EQ(summary.rows[0].calls_per_launch, 2);
  EXPECT_DOUBLE_EQ(summary.rows[0].ns_per_launch, 210);
  EXPECT_DOUBLE_EQ(summary.rows[0].exclusive_ns_per_launch, 200);
  EXPECT_DOUBLE_EQ(summary.rows[0].busy_share, 0.8);
  EXPECT_EQ(summary.rows[1].name, "Norm");
  EXPECT_DOUBLE_EQ(summary.rows[1].calls_per_launch, 1);
  EXPECT_DOUBLE_EQ(summary.rows[1].ns_per_launch, 50);
  EXPECT_DOUBLE_EQ(summary.rows[1].exclusive_ns_per_launch, 50);
  EXPECT_DOUBLE_EQ(summary.rows[1].busy_share, 0.2);
}

TEST(SummarizeTest, TiedCountsTakeTheLargerCount) {
  std::vector<KernelSpan> spans;
  AddLaunch(1, 1, 0, {{kNorm, 0, 10}, {kNorm, 10, 20}}, spans);
  AddLaunch(2, 1, 100, {{kNorm, 0, 10}, {kNorm, 10, 20}}, spans);
  AddLaunch(3, 1, 200, {{kNorm, 0, 10}, {kNorm, 10, 20}, {kNorm, 30, 40}},
            spans);
  AddLaunch(4, 1, 300, {{kNorm, 0, 10}, {kNorm, 10, 20}, {kNorm, 30, 40}},
            spans);
  const TimelineSummary summary = Summarize(spans, 1);
  EXPECT_EQ(summary.kernels_per_launch, 3);
  EXPECT_EQ(summary.launches, 2);
  EXPECT_DOUBLE_EQ(summary.median_idle_ns, 10);
}

// A bench times one graph a configuration; batch 1 and batch 2 steps have
// the same kernel count, so a table pooled by kernel count would average
// the two. Each replayed graph is summarised apart, in order of its first
// launch; a graph launched once (a checked step) is not a replay.
TEST(SummarizeTest, GraphsOfTheSameKernelCountApart) {
  std::vector<KernelSpan> spans;
  for (uint32_t i = 0; i < 3; ++i) {
    AddLaunch(10 + i, 3, 1000 * (i + 1), {{kGemv1, 0, 100}, {kNorm, 100, 150}},
              spans);
    AddLaunch(20 + i, 7, 10000 * (i + 1), {{kGemv1, 0, 300}, {kNorm, 300, 400}},
              spans);
  }
  AddLaunch(30, 5, 500, {{kGemv1, 0, 10}, {kNorm, 10, 20}}, spans);
  EXPECT_THAT(ReplayedGraphs(spans), ElementsAre(3u, 7u));
  const TimelineSummary first = Summarize(spans, 3);
  const TimelineSummary second = Summarize(spans, 7);
  EXPECT_EQ(first.launches, 3);
  EXPECT_EQ(second.launches, 3);
  EXPECT_DOUBLE_EQ(first.median_span_ns, 150);
  EXPECT_DOUBLE_EQ(second.median_span_ns, 400);
  ASSERT_EQ(second.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(second.rows[0].exclusive_ns_per_launch, 300);
  const std::string text = FormatEveryGraph(spans);
  EXPECT_THAT(text, HasSubstr("graph 3 summarised: 3 launches of 2 kernels"));
  EXPECT_THAT(text, HasSubstr("graph 7 summarised: 3 launches of 2 kernels"));
  EXPECT_LT(text.find("graph 3 "), text.find("graph 7 "));
}

TEST(SummarizeTest, NoGraphLaunch) {
  std::vector<KernelSpan> spans;
  AddLaunch(1, 0, 0, {{kNorm, 0, 10}}, spans);
  EXPECT_TRUE(ReplayedGraphs(spans).empty());
  EXPECT_EQ(FormatEveryGraph(spans),
            "kernel timeline: 1 launches, 0 from graphs; no graph launch to "
            "summarise\n");
  const TimelineSummary summary = Summarize(spans, 0);
  EXPECT_EQ(summary.all_launches, 1);
  EXPECT_EQ(summary.launches, 0);
  EXPECT_TRUE(summary.rows.empty());
  EXPECT_DOUBLE_EQ(summary.idle_percent(), 0);
  EXPECT_EQ(FormatSummary(summary),
            "kernel timeline: 1 launches, 0 from graphs; no graph launch to "
            "summarise\n");
}

TEST(FormatSummaryTest, FixedWidthTable) {
  EXPECT_EQ(FormatSummary(Summarize(TimedReplays(), 7)),
            "kernel timeline: 3 launches, 3 from graphs; graph 7 summarised: "
            "3 launches of 3 kernels\n"
            "median span 0.3 us, median idle 0.1 us; idle 21.88 % of the "
            "span (total idle / total span)\n"
            "kernel  calls/launch   us/launch  excl us/launch  % of busy\n"
            "Gemv             2.0        0.21            0.20      80.00\n"
            "Norm             1.0        0.05            0.05      20.00\n");
}

TEST(SpansCsvTest, RoundTripKeepsCommasInNames) {
  const std::vector<KernelSpan> spans = {
      {"void Tile<2, (Mode)1>(Args, int)", 1700000000000000123u,
       1700000000000009999u, 4294967295u, 12},
      {"Eager", 5, 5, 1, 0},
      {"", 7, 8, 2, 0}};
  std::stringstream csv;
  WriteSpansCsv(spans, csv);
  EXPECT_EQ(csv.str(),
            "launch_id,graph_id,start_ns,end_ns,name\n"
            "4294967295,12,1700000000000000123,1700000000000009999,"
            "void Tile<2, (Mode)1>(Args, int)\n"
            "1,0,5,5,Eager\n"
            "2,0,7,8,\n");
  const absl::StatusOr<std::vector<KernelSpan>> read = ReadSpansCsv(csv);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ((*read)[i].name, spans[i].name);
    EXPECT_EQ((*read)[i].start_ns, spans[i].start_ns);
    EXPECT_EQ((*read)[i].end_ns, spans[i].end_ns);
    EXPECT_EQ((*read)[i].launch_id, spans[i].launch_id);
    EXPECT_EQ((*read)[i].graph_id, spans[i].graph_id);
  }
}

TEST(SpansCsvTest, LineBreaksInNamesBecomeSpaces) {
  std::stringstream csv;
  WriteSpansCsv({{"a\nb\rc", 1, 2, 3, 4}}, csv);
  EXPECT_EQ(csv.str(),
            "launch_id,graph_id,start_ns,end_ns,name\n3,4,1,2,a b c\n");
}

TEST(SpansCsvTest, AcceptsCrLfAndBlankLines) {
  std::stringstream csv(
      "launch_id,graph_id,start_ns,end_ns,name\r\n\r\n1,2,3,4,K(int)\r\n\n");
  const absl::StatusOr<std::vector<KernelSpan>> read = ReadSpansCsv(csv);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].name, "K(int)");
  EXPECT_EQ((*read)[0].end_ns, 4u);
}

TEST(SpansCsvTest, RefusesBadInputNamingTheLine) {
  const struct {
    std::string text;
    std::string message;
  } cases[] = {
      {"", "line 1: want the header"},
      {"launch_id,name\n", "line 1: want the header"},
      {"launch_id,graph_id,start_ns,end_ns,name\n1,2,3\n", "line 2: want"},
      {"launch_id,graph_id,start_ns,end_ns,name\n1,2,x,4,K\n", "line 2: want"},
      {"launch_id,graph_id,start_ns,end_ns,name\n-1,2,3,4,K\n", "line 2: want"},
      {"launch_id,graph_id,start_ns,end_ns,name\n\n4294967296,2,3,4,K\n",
       "line 3: want"},
      {"launch_id,graph_id,start_ns,end_ns,name\n1,2,9,4,K\n",
       "line 2: end_ns 4 before start_ns 9"},
  };
  for (const auto& c : cases) {
    std::stringstream csv(c.text);
    const absl::StatusOr<std::vector<KernelSpan>> read = ReadSpansCsv(csv);
    ASSERT_FALSE(read.ok()) << c.text;
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(read.status().message()), HasSubstr(c.message))
        << c.text;
  }
}

TEST(SpansCsvTest, MissingFileIsNotFound) {
  const absl::StatusOr<std::vector<KernelSpan>> read =
      ReadSpansCsvFile("/nonexistent/kernel_timeline.csv");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace moetune::profiling
