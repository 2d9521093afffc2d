#include "kernels/profiling/kernel_timeline.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

namespace moetune::profiling {
namespace {

constexpr std::string_view kAnonymousNamespace = "(anonymous namespace)";

// `text` without any "(anonymous namespace)": its parentheses would read as
// a parameter list and its space as the end of a return type.
std::string WithoutAnonymousNamespaces(std::string_view text) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(kAnonymousNamespace, pos);
    out.append(text.substr(pos, hit == std::string_view::npos
                                    ? std::string_view::npos
                                    : hit - pos));
    if (hit == std::string_view::npos) return out;
    pos = hit + kAnonymousNamespace.size();
  }
}

// The text before the parameter list, with template arguments left out.
// Brackets are matched, so parentheses inside template arguments
// ("Tile<(Mode)1>") do not end the name; inside parentheses '<' and '>'
// are comparisons ("Fits<(1 > 2)>"), not brackets.
std::string OutsideBrackets(std::string_view text) {
  std::string out;
  std::vector<char> open;
  for (const char c : text) {
    if (open.empty()) {
      if (c == '(') break;
      if (c == '<') {
        open.push_back(c);
      } else {
        out.push_back(c);
      }
    } else if (c == '(' || (c == '<' && open.back() == '<')) {
      open.push_back(c);
    } else if ((c == ')' && open.back() == '(') ||
               (c == '>' && open.back() == '<')) {
      open.pop_back();
    }
  }
  return out;
}

// The last space-separated word of `text` (drops a "void " return type).
std::string_view LastWord(std::string_view text) {
  const size_t end = text.find_last_not_of(' ');
  if (end == std::string_view::npos) return {};
  text = text.substr(0, end + 1);
  const size_t space = text.rfind(' ');
  return space == std::string_view::npos ? text : text.substr(space + 1);
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// Each launch's spans, by launch id.
std::map<uint32_t, std::vector<const KernelSpan*>> GroupByLaunch(
    const std::vector<KernelSpan>& spans) {
  std::map<uint32_t, std::vector<const KernelSpan*>> groups;
  for (const KernelSpan& span : spans) groups[span.launch_id].push_back(&span);
  return groups;
}

std::vector<Interval> IntervalsOf(const std::vector<const KernelSpan*>& spans) {
  std::vector<Interval> intervals;
  intervals.reserve(spans.size());
  for (const KernelSpan* span : spans) {
    intervals.emplace_back(span->start_ns, span->end_ns);
  }
  return intervals;
}

LaunchStats StatsOf(const std::vector<const KernelSpan*>& spans) {
  LaunchStats stats;
  stats.launch_id = spans.front()->launch_id;
  stats.graph_id = spans.front()->graph_id;
  stats.kernels = static_cast<int>(spans.size());
  stats.start_ns = spans.front()->start_ns;
  uint64_t end_ns = spans.front()->end_ns;
  for (const KernelSpan* span : spans) {
    stats.start_ns = std::min(stats.start_ns, span->start_ns);
    end_ns = std::max(end_ns, span->end_ns);
  }
  stats.span_ns = end_ns - stats.start_ns;
  stats.busy_ns = UnionLengthNs(IntervalsOf(spans));
  return stats;
}

// The most common kernel count among graph graph_id's launches; ties go to
// the larger count. 0 when it has no launch.
int ModalKernelCount(const std::vector<LaunchStats>& launches,
                     uint32_t graph_id) {
  std::map<int, int> launches_by_count;
  for (const LaunchStats& launch : launches) {
    if (launch.graph_id == graph_id) ++launches_by_count[launch.kernels];
  }
  int modal = 0;
  int most = 0;
  for (const auto& [count, times] : launches_by_count) {
    if (times >= most) {
      modal = count;
      most = times;
    }
  }
  return modal;
}

// Per base name: calls, summed durations and exclusive time over `groups`.
struct NameTotals {
  uint64_t calls = 0;
  uint64_t duration_ns = 0;
  uint64_t exclusive_ns = 0;
};

void AddLaunchTotals(const std::vector<const KernelSpan*>& spans,
                     std::unordered_map<std::string, std::string>& base_names,
                     std::map<std::string, NameTotals>& totals) {
  const std::vector<uint64_t> exclusive =
      ExclusiveLengthsNs(IntervalsOf(spans));
  for (size_t i = 0; i < spans.size(); ++i) {
    const KernelSpan& span = *spans[i];
    auto [it, inserted] = base_names.try_emplace(span.name);
    if (inserted) it->second = KernelBaseName(span.name);
    NameTotals& t = totals[it->second];
    ++t.calls;
    t.duration_ns +=
        span.end_ns > span.start_ns ? span.end_ns - span.start_ns : 0;
    t.exclusive_ns += exclusive[i];
  }
}

std::vector<KernelNameRow> RowsOf(
    const std::map<std::string, NameTotals>& totals, int launches,
    uint64_t busy_ns) {
  std::vector<KernelNameRow> rows;
  for (const auto& [name, t] : totals) {
    KernelNameRow row;
    row.name = name;
    row.calls_per_launch = static_cast<double>(t.calls) / launches;
    row.ns_per_launch = static_cast<double>(t.duration_ns) / launches;
    row.exclusive_ns_per_launch =
        static_cast<double>(t.exclusive_ns) / launches;
    row.busy_share = busy_ns ? static_cast<double>(t.exclusive_ns) /
                                   static_cast<double>(busy_ns)
                             : 0.0;
    rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const KernelNameRow& a, const KernelNameRow& b) {
                     return a.exclusive_ns_per_launch >
                            b.exclusive_ns_per_launch;
                   });
  return rows;
}

template <typename... Args>
std::string Format(const char* format, Args... args) {
  char text[256];
  std::snprintf(text, sizeof(text), format, args...);
  return text;
}

}  // namespace

std::string KernelBaseName(std::string_view demangled) {
  const std::string outside =
      OutsideBrackets(WithoutAnonymousNamespaces(demangled));
  std::string_view name = LastWord(outside);
  const size_t scope = name.rfind("::");
  if (scope != std::string_view::npos) name = name.substr(scope + 2);
  if (name.empty()) return std::string(demangled);
  return std::string(name);
}

std::vector<uint64_t> ExclusiveLengthsNs(
    const std::vector<Interval>& intervals) {
  std::vector<size_t> order(intervals.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return intervals[a].first < intervals[b].first;
  });
  // Every interval that started earlier ends by `covered_to` at the latest,
  // and together they cover [this start, covered_to) without a gap, since
  // each of them reaching past this start covers it up to its own end.
  std::vector<uint64_t> exclusive(intervals.size(), 0);
  uint64_t covered_to = 0;
  for (const size_t i : order) {
    const auto [start, end] = intervals[i];
    if (end <= start) continue;
    const uint64_t from = std::max(start, covered_to);
    if (end > from) exclusive[i] = end - from;
    covered_to = std::max(covered_to, end);
  }
  return exclusive;
}

uint64_t UnionLengthNs(const std::vector<Interval>& intervals) {
  const std::vector<uint64_t> exclusive = ExclusiveLengthsNs(intervals);
  return std::accumulate(exclusive.begin(), exclusive.end(), uint64_t{0});
}

namespace {

// A run's launches, grouped and measured once for all of its graphs'
// summaries: each launch's spans, and its stats in order of first start.
struct Launches {
  std::map<uint32_t, std::vector<const KernelSpan*>> groups;
  std::vector<LaunchStats> stats;
};

Launches LaunchesOf(const std::vector<KernelSpan>& spans) {
  Launches launches;
  launches.groups = GroupByLaunch(spans);
  for (const auto& [launch_id, group] : launches.groups) {
    launches.stats.push_back(StatsOf(group));
  }
  std::stable_sort(launches.stats.begin(), launches.stats.end(),
                   [](const LaunchStats& a, const LaunchStats& b) {
                     return a.start_ns < b.start_ns;
                   });
  return launches;
}

std::vector<uint32_t> ReplayedGraphsOf(const Launches& launches) {
  std::map<uint32_t, int> launches_of;
  std::vector<uint32_t> order;
  for (const LaunchStats& launch : launches.stats) {
    if (launch.graph_id == 0) continue;
    if (launches_of[launch.graph_id]++ == 0) order.push_back(launch.graph_id);
  }
  std::vector<uint32_t> replayed;
  for (const uint32_t graph : order) {
    if (launches_of[graph] > 1) replayed.push_back(graph);
  }
  return replayed;
}

TimelineSummary SummarizeGraph(const Launches& launches, uint32_t graph_id) {
  TimelineSummary summary;
  summary.all_launches = static_cast<int>(launches.stats.size());
  summary.graph_id = graph_id;
  if (graph_id != 0) {
    summary.kernels_per_launch = ModalKernelCount(launches.stats, graph_id);
  }
  std::vector<double> spans_ns, idles_ns;
  std::unordered_map<std::string, std::string> base_names;
  std::map<std::string, NameTotals> totals;
  for (const LaunchStats& launch : launches.stats) {
    if (launch.graph_id == 0) continue;
    ++summary.graph_launches;
    if (graph_id == 0 || launch.graph_id != graph_id ||
        launch.kernels != summary.kernels_per_launch) {
      continue;
    }
    ++summary.launches;
    spans_ns.push_back(static_cast<double>(launch.span_ns));
    idles_ns.push_back(static_cast<double>(launch.idle_ns()));
    summary.total_span_ns += launch.span_ns;
    summary.total_busy_ns += launch.busy_ns;
    AddLaunchTotals(launches.groups.at(launch.launch_id), base_names, totals);
  }
  summary.median_span_ns = Median(spans_ns);
  summary.median_idle_ns = Median(idles_ns);
  if (summary.launches > 0) {
    summary.rows = RowsOf(totals, summary.launches, summary.total_busy_ns);
  }
  return summary;
}

}  // namespace

std::vector<LaunchStats> StatsByLaunch(const std::vector<KernelSpan>& spans) {
  return LaunchesOf(spans).stats;
}

double TimelineSummary::idle_percent() const {
  if (total_span_ns == 0) return 0;
  return 100.0 * static_cast<double>(total_span_ns - total_busy_ns) /
         static_cast<double>(total_span_ns);
}

std::vector<uint32_t> ReplayedGraphs(const std::vector<KernelSpan>& spans) {
  return ReplayedGraphsOf(LaunchesOf(spans));
}

TimelineSummary Summarize(const std::vector<KernelSpan>& spans,
                          uint32_t graph_id) {
  return SummarizeGraph(LaunchesOf(spans), graph_id);
}

std::string FormatSummary(const TimelineSummary& s) {
  std::string text = "kernel timeline: " + std::to_string(s.all_launches) +
                     " launches, " + std::to_string(s.graph_launches) +
                     " from graphs";
  if (s.launches == 0) return text + "; no graph launch to summarise\n";
  text += "; graph " + std::to_string(s.graph_id) +
          " summarised: " + std::to_string(s.launches) + " launches of " +
          std::to_string(s.kernels_per_launch) + " kernels\n";
  text += Format(
      "median span %.1f us, median idle %.1f us; idle %.2f %% of "
      "the span (total idle / total span)\n",
      s.median_span_ns / 1e3, s.median_idle_ns / 1e3, s.idle_percent());
  size_t width = 6;  // "kernel"
  for (const KernelNameRow& row : s.rows)
    width = std::max(width, row.name.size());
  std::string header = "kernel";
  header.resize(width, ' ');
  text += header + "  calls/launch   us/launch  excl us/launch  % of busy\n";
  for (const KernelNameRow& row : s.rows) {
    std::string name = row.name;
    name.resize(width, ' ');
    text += name +
            Format("  %12.1f  %10.2f", row.calls_per_launch,
                   row.ns_per_launch / 1e3) +
            Format("  %14.2f  %9.2f\n", row.exclusive_ns_per_launch / 1e3,
                   100.0 * row.busy_share);
  }
  return text;
}

std::string FormatEveryGraph(const std::vector<KernelSpan>& spans) {
  const Launches launches = LaunchesOf(spans);
  const std::vector<uint32_t> graphs = ReplayedGraphsOf(launches);
  if (graphs.empty()) return FormatSummary(SummarizeGraph(launches, 0));
  std::string text;
  for (const uint32_t graph : graphs) {
    text += FormatSummary(SummarizeGraph(launches, graph));
  }
  return text;
}

void WriteSpansCsv(const std::vector<KernelSpan>& spans, std::ostream& out) {
  out << kSpansCsvHeader << '\n';
  for (const KernelSpan& span : spans) {
    std::string name = span.name;
    std::replace(name.begin(), name.end(), '\n', ' ');
    std::replace(name.begin(), name.end(), '\r', ' ');
    out << span.launch_id << ',' << span.graph_id << ',' << span.start_ns << ','
        << span.end_ns << ',' << name << '\n';
  }
}

}  // namespace moetune::profiling
