// A CUDA injection library that records the kernel timeline of any CUDA
// process, for a GPU machine that has CUPTI but no nsys:
//
//   CUDA_INJECTION64_PATH=/path/libmoetune_cupti_injection.so
//   MOETUNE_KERNEL_TIMELINE=out.csv moetune-step-bench ...   (one line)
//
// The CUDA driver loads it at cuInit and calls InitializeInjection. Every
// kernel's execution is recorded through CUPTI's activity API; at process
// exit the spans go to MOETUNE_KERNEL_TIMELINE (default
// ./kernel_timeline.csv; "%p" in it becomes the process id, for gangs of
// processes) and their summary (kernels/profiling/kernel_timeline.h) to
// stderr.
//
// Not built by CMake: CI and dev machines have no CUPTI.
// scripts/build_cupti_injection.sh builds it on the GPU machine, passing
// MOETUNE_CUPTI_KERNEL_RECORD, the newest CUpti_ActivityKernelN that its
// cupti_activity.h declares: the record struct is versioned, and only
// fields every version since 5 has are read (kind, start, end,
// correlationId, graphId, name).
#include <cuda.h>
#include <cupti.h>
#include <cxxabi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/profiling/kernel_timeline.h"

#ifndef MOETUNE_CUPTI_KERNEL_RECORD
#error \
    "MOETUNE_CUPTI_KERNEL_RECORD: build with scripts/build_cupti_injection.sh"
#endif

namespace moetune::profiling {
namespace {

using KernelRecord = MOETUNE_CUPTI_KERNEL_RECORD;

// Big host buffers, so that CUPTI hands few of them back: each holds tens of
// thousands of kernel records.
constexpr size_t kBufferBytes = size_t{8} << 20;
static_assert(kBufferBytes % ACTIVITY_RECORD_ALIGNMENT == 0);

// Kernel records left out of the spans, or suspect in them.
struct RecordCounts {
  uint64_t untimed = 0;  // start 0: CUPTI lacked device memory to time it
  uint64_t dropped = 0;  // CUPTI dropped them for want of a buffer
  // correlationId 0: such kernels all fall in one launch, and the grouping
  // by launch means nothing. Counted to show it; not expected.
  uint64_t uncorrelated = 0;
};

struct Recorder {
  std::mutex mu;
  std::vector<KernelSpan> spans;
  RecordCounts counts;
  bool written = false;
};

// Never destroyed: CUPTI may hand back a buffer from its own thread while
// static destructors run.
Recorder& TheRecorder() {
  static Recorder* const recorder = new Recorder;
  return *recorder;
}

bool Ok(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return true;
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS) text = nullptr;
  std::fprintf(stderr, "moetune kernel timeline: %s failed: %s (%d)\n", what,
               text != nullptr ? text : "unknown CUPTI error",
               static_cast<int>(result));
  return false;
}

// The demangled name, or the name as the driver has it when it is not a
// mangled C++ name (extern "C" kernels).
std::string Demangled(const char* name) {
  if (name == nullptr) return "(unnamed)";
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> text(
      abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && text != nullptr ? std::string(text.get())
                                        : std::string(name);
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size,
                              size_t* max_records) {
  // CUPTI writes records at ACTIVITY_RECORD_ALIGNMENT (8) boundaries.
  *buffer = static_cast<uint8_t*>(
      std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

// The kernel records of a completed buffer as spans, counting untimed and
// uncorrelated ones in `counts`.
std::vector<KernelSpan> SpansIn(uint8_t* buffer, size_t valid_bytes,
                                RecordCounts& counts) {
  std::vector<KernelSpan> spans;
  CUpti_Activity* record = nullptr;
  while (true) {
    const CUptiResult result =
        cuptiActivityGetNextRecord(buffer, valid_bytes, &record);
    if (result == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // the buffer's end
    if (!Ok(result, "cuptiActivityGetNextRecord")) break;
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* kernel = reinterpret_cast<const KernelRecord*>(record);
    if (kernel->start == 0 || kernel->end < kernel->start) {
      ++counts.untimed;
      continue;
    }
    if (kernel->correlationId == 0) ++counts.uncorrelated;
    spans.push_back({Demangled(kernel->name), kernel->start, kernel->end,
                     kernel->correlationId, kernel->graphId});
  }
  return spans;
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream_id,
                              uint8_t* buffer, size_t /*size*/,
                              size_t valid_bytes) {
  if (buffer == nullptr) return;
  RecordCounts counts;
  std::vector<KernelSpan> spans = valid_bytes > 0
                                      ? SpansIn(buffer, valid_bytes, counts)
                                      : std::vector<KernelSpan>();
  std::free(buffer);
  size_t dropped = 0;
  if (!Ok(cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped),
          "cuptiActivityGetNumDroppedRecords")) {
    dropped = 0;
  }
  Recorder& recorder = TheRecorder();
  const std::lock_guard<std::mutex> lock(recorder.mu);
  recorder.spans.insert(recorder.spans.end(),
                        std::make_move_iterator(spans.begin()),
                        std::make_move_iterator(spans.end()));
  recorder.counts.untimed += counts.untimed;
  recorder.counts.dropped += dropped;
  recorder.counts.uncorrelated += counts.uncorrelated;
}

// MOETUNE_KERNEL_TIMELINE with every "%p" replaced by the process id.
std::string OutputPath() {
  const char* env = std::getenv("MOETUNE_KERNEL_TIMELINE");
  std::string path =
      env != nullptr && *env != '\0' ? env : "kernel_timeline.csv";
  const std::string pid = std::to_string(getpid());
  for (size_t at = path.find("%p"); at != std::string::npos;
       at = path.find("%p", at + pid.size())) {
    path.replace(at, 2, pid);
  }
  return path;
}

// At exit: the last buffers (a forced flush also returns partly filled
// ones), then the CSV and the summary, once.
void WriteTimeline() {
  Ok(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
     "cuptiActivityFlushAll");
  Recorder& recorder = TheRecorder();
  const std::lock_guard<std::mutex> lock(recorder.mu);
  if (recorder.written) return;
  recorder.written = true;
  const std::string path = OutputPath();
  std::ofstream out(path);
  WriteSpansCsv(recorder.spans, out);
  out.close();
  const RecordCounts& c = recorder.counts;
  std::fprintf(stderr,
               "moetune kernel timeline: %zu kernels %s %s (left out: %llu "
               "untimed, %llu dropped by CUPTI; %llu without correlation id)\n",
               recorder.spans.size(), out ? "written to" : "NOT WRITTEN to",
               path.c_str(), static_cast<unsigned long long>(c.untimed),
               static_cast<unsigned long long>(c.dropped),
               static_cast<unsigned long long>(c.uncorrelated));
  std::fputs(FormatEveryGraph(recorder.spans).c_str(), stderr);
}

// 1 when recording, 0 when CUPTI refused (the process runs on untraced).
int Initialize() {
  if (!Ok(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted),
          "cuptiActivityRegisterCallbacks")) {
    return 0;
  }
  // CONCURRENT_KERNEL, not KERNEL: the latter serializes kernels, which
  // would hide exactly the overlap and gaps being measured.
  if (!Ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
          "cuptiActivityEnable(CONCURRENT_KERNEL)")) {
    return 0;
  }
  if (std::atexit(WriteTimeline) != 0) {
    std::fputs("moetune kernel timeline: atexit failed; nothing written\n",
               stderr);
    return 0;
  }
  return 1;
}

}  // namespace
}  // namespace moetune::profiling

// The CUDA driver's entry point, looked up by name: exported although the
// library is built with -fvisibility=hidden. The driver calls it once; the
// guard only keeps a second call from enabling twice.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(
    void) {
  static const int initialized = moetune::profiling::Initialize();
  return initialized;
}
