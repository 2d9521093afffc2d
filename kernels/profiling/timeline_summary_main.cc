// moetune-timeline: summarises recorded kernel timelines again (the CSVs the
// CUPTI injection library writes, e.g. fetched from the GPU machine), one
// table a replayed graph, as the library prints at exit. Plain C++: runs on
// any machine.
//
//   moetune-timeline TIMELINE.csv [MORE.csv ...]
//
// Exit 2 when there is no file or a file cannot be read or parsed (the
// message names the file and, from ReadSpansCsv, the line).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/profiling/kernel_timeline.h"
#include "kernels/profiling/kernel_timeline_csv.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs("usage: moetune-timeline TIMELINE.csv [MORE.csv ...]\n", stderr);
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    const absl::StatusOr<std::vector<moetune::profiling::KernelSpan>> spans =
        moetune::profiling::ReadSpansCsvFile(argv[i]);
    if (!spans.ok()) {
      std::fprintf(stderr, "moetune-timeline: %s: %s\n", argv[i],
                   std::string(spans.status().message()).c_str());
      return 2;
    }
    if (argc > 2) std::printf("== %s\n", argv[i]);
    std::fputs(moetune::profiling::FormatEveryGraph(*spans).c_str(), stdout);
  }
  return 0;
}
