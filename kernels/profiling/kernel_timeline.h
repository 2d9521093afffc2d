// The GPU's kernel timeline, measured: which kernels ran when, and how much
// of each graph launch was spent between kernels. The figures it serves
// (with the graph on, the time between kernels, to stay under 5 % of the
// step; each category's share of the measured time) need the device's own
// timestamps; the GPU machine has CUPTI but no nsys, so the CUPTI injection
// library (cupti_injection.cc) records KernelSpans and this file summarises
// them.
//
// Plain C++ with no abseil, CUDA or CUPTI: the injection library is built on
// the GPU machine with g++ alone (scripts/build_cupti_injection.sh), where no
// abseil is installed. Reading a CSV back, which wants Status, is in
// kernel_timeline_csv.h. Everything here is a pure function; thread-safe.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moetune::profiling {

// One kernel's execution on the device (CUPTI's concurrent-kernel record).
struct KernelSpan {
  std::string name;  // demangled where it could be, else as the driver had it
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  // CUPTI's correlation id: every kernel of one cudaGraphLaunch shares it, so
  // it groups a graph replay's kernels; an eager launch has its own.
  uint32_t launch_id = 0;
  uint32_t graph_id = 0;  // 0 = not launched from a graph
};

// The kernel's name without return type, namespaces, template arguments
// and parameter list, e.g. "GemvKernel" from
//   void moetune::gpu::(anonymous namespace)::GemvKernel<4, 128>(Args)
// The key the per-name table groups by, so every instantiation of a
// template is one row. A name it cannot take apart comes back whole.
std::string KernelBaseName(std::string_view demangled);

// [start_ns, end_ns) of one kernel.
using Interval = std::pair<uint64_t, uint64_t>;

// Each interval's share of their union when every instant is credited to
// the earliest-starting interval that covers it (ties: the order given).
// The shares sum to UnionLengthNs exactly, so a table of them adds up to
// the busy time; under PDL the overlap goes to the kernel still running,
// which the one that started early is waiting for. Empty or inverted
// intervals get 0.
std::vector<uint64_t> ExclusiveLengthsNs(
    const std::vector<Interval>& intervals);

// The length of the union of the intervals: the time at least one of them
// covers. Kernels of one launch overlap (programmatic dependent launch
// starts the next before the last ends), so their summed durations
// overstate the time the device was busy.
uint64_t UnionLengthNs(const std::vector<Interval>& intervals);

// One launch's kernels together.
struct LaunchStats {
  uint32_t launch_id = 0;
  uint32_t graph_id = 0;
  int kernels = 0;
  uint64_t start_ns = 0;  // the first kernel's start
  uint64_t span_ns = 0;   // last end - first start
  uint64_t busy_ns = 0;   // the union of the kernels' intervals
  uint64_t idle_ns() const { return span_ns - busy_ns; }
};

// The spans grouped by launch_id, in order of their first kernel's start.
std::vector<LaunchStats> StatsByLaunch(const std::vector<KernelSpan>& spans);

// One KernelBaseName's row of the summary, per summarised launch.
struct KernelNameRow {
  std::string name;
  double calls_per_launch = 0;
  double ns_per_launch = 0;            // summed durations / launches
  double exclusive_ns_per_launch = 0;  // ExclusiveLengthsNs summed / launches
  double busy_share = 0;               // exclusive time / busy time, in [0, 1]
};

// The timed replays of one captured graph. A bench run also has eager
// launches, a differently shaped checked step, and one graph for each
// configuration it times (batch 1 and 2 may have the same kernel count, so
// graphs are summarised apart, never pooled); of the graph's launches, those
// with its most common kernel count (ties: the larger count; a replay whose
// records CUPTI dropped has fewer) are summarised.
struct TimelineSummary {
  int all_launches = 0;        // distinct launch ids in the input
  int graph_launches = 0;      // of them, from any graph
  uint32_t graph_id = 0;       // the graph summarised
  int kernels_per_launch = 0;  // its modal count
  int launches = 0;            // its launches with that count
  double median_span_ns = 0;
  double median_idle_ns = 0;
  uint64_t total_span_ns = 0;
  uint64_t total_busy_ns = 0;
  // Sorted by exclusive time, largest first; names tie-break.
  std::vector<KernelNameRow> rows;
  // total idle / total span in percent (0 when nothing was summarised).
  double idle_percent() const;
};

// The graphs launched more than once (replayed: timed), in order of their
// first launch.
std::vector<uint32_t> ReplayedGraphs(const std::vector<KernelSpan>& spans);

// Graph graph_id's replays.
TimelineSummary Summarize(const std::vector<KernelSpan>& spans,
                          uint32_t graph_id);

// A fixed-width text table of the summary, for a terminal or a PERF.md.
std::string FormatSummary(const TimelineSummary& summary);

// FormatSummary of every replayed graph, in order, or one line saying there
// is none.
std::string FormatEveryGraph(const std::vector<KernelSpan>& spans);

// The CSV header line (without newline): the name goes last because
// demangled template names hold commas; a reader takes the rest of the line.
inline constexpr std::string_view kSpansCsvHeader =
    "launch_id,graph_id,start_ns,end_ns,name";

// Writes the header and one line per span. Line breaks in a name become
// spaces, so that every span stays one line. The caller checks the stream.
void WriteSpansCsv(const std::vector<KernelSpan>& spans, std::ostream& out);

}  // namespace moetune::profiling
