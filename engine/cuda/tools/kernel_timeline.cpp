// A CUPTI injection library (load it with CUDA_INJECTION64_PATH): records the start and end of
// every kernel the process runs, from CUPTI's concurrent-kernel activity records (so kernels in
// CUDA graphs and the overlap of programmatic dependent launches show as they ran), and writes
// them as CSV to $DICE_KERNEL_TIMELINE when the process exits. Nsight Systems, which would show
// the same, is not on the device image (bench/results/2026-11-28-wgmma-producer-h200).
// bench/device_kernel_timeline.sh runs `dice engine bench` under it and
// bench/kernel_timeline_report.py reads the CSV.
//
// CSV columns: start_ns, end_ns (GPU timestamps), graph_node (0 outside graphs), stream, grid
// (blocks), block (threads), shared (bytes a block), name (mangled; last, never holds a comma).
// Only the first $DICE_KERNEL_TIMELINE_MAX kernels (default 4,000,000) are kept.

#include <cupti.h>

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace {

/// One kernel execution (CUpti_ActivityKernel10's fields that the report uses).
struct KernelRecord {
  std::uint64_t start = 0, end = 0, graph_node = 0;
  std::uint32_t stream = 0;
  std::int64_t grid = 0, block = 0, shared = 0;
  const char* name = nullptr;  ///< CUPTI's: one string per kernel, valid while the process runs
};

/// The process's recorder. CUPTI's buffer callbacks are plain functions without a user pointer,
/// so they reach it through recorder(); an injection library has no other owner to hang it on.
class Recorder {
 public:
  Recorder() {
    const char* max = std::getenv("DICE_KERNEL_TIMELINE_MAX");
    if (max == nullptr) return;
    const std::string_view text(max);
    std::uint64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size())
      std::fprintf(stderr,
                   "kernel_timeline: DICE_KERNEL_TIMELINE_MAX=%s is not a count; keeping %llu\n",
                   max, static_cast<unsigned long long>(limit_));
    else
      limit_ = value;
  }
  void add(const KernelRecord& r) {
    const std::lock_guard lock(mutex_);
    if (closed_) return;
    if (records_.size() < limit_)
      records_.push_back(r);
    else
      ++dropped_;
  }
  /// Writes the CSV to `path`, complaining on stderr (naming the path) when it cannot; drops
  /// every record from here on.
  void write(const std::string& path) {
    const std::lock_guard lock(mutex_);
    closed_ = true;
    std::ofstream out(path);
    out << "start_ns,end_ns,graph_node,stream,grid,block,shared,name\n";
    for (const KernelRecord& r : records_)
      out << r.start << ',' << r.end << ',' << r.graph_node << ',' << r.stream << ',' << r.grid
          << ',' << r.block << ',' << r.shared << ',' << (r.name != nullptr ? r.name : "?") << '\n';
    out.flush();
    if (!out)
      std::fprintf(stderr, "kernel_timeline: could not write %s\n", path.c_str());
    else
      std::fprintf(stderr, "kernel_timeline: %zu kernels to %s (%llu past the limit dropped)\n",
                   records_.size(), path.c_str(), static_cast<unsigned long long>(dropped_));
  }

 private:
  std::mutex mutex_;
  std::vector<KernelRecord> records_;
  std::uint64_t limit_ = 4'000'000, dropped_ = 0;
  bool closed_ = false;
};

Recorder& recorder() {
  static Recorder r;
  return r;
}

constexpr std::size_t kBufferBytes = std::size_t{8} << 20;

/// CUPTI asks for an activity buffer: it hands it back full (buffer_completed), which frees it.
void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t,
                               std::size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    recorder().add({k->start, k->end, k->graphNodeId, k->streamId,
                    std::int64_t{k->gridX} * k->gridY * k->gridZ,
                    std::int64_t{k->blockX} * k->blockY * k->blockZ,
                    std::int64_t{k->staticSharedMemory} + k->dynamicSharedMemory, k->name});
  }
  std::free(buffer);
}

/// At exit: CUPTI's last buffers, then the file; records after it are dropped.
void finish() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (const char* path = std::getenv("DICE_KERNEL_TIMELINE")) recorder().write(path);
}

/// Whether a CUPTI call succeeded; if not, a line on stderr naming `call` and CUPTI's reason.
bool cupti_ok(CUptiResult result, const char* call) {
  if (result == CUPTI_SUCCESS) return true;
  const char* what = nullptr;
  cuptiGetResultString(result, &what);
  std::fprintf(stderr, "kernel_timeline: %s failed: %s\n", call, what != nullptr ? what : "?");
  return false;
}

}  // namespace

/// Called by the CUDA driver when it loads this library (CUDA_INJECTION64_PATH). Returns 1 when
/// kernel tracing is on, 0 (and a line on stderr) when it is not: no DICE_KERNEL_TIMELINE, or
/// CUPTI refused.
extern "C" int InitializeInjection() {
  if (std::getenv("DICE_KERNEL_TIMELINE") == nullptr) {
    std::fprintf(stderr, "kernel_timeline: DICE_KERNEL_TIMELINE (the CSV path) is not set\n");
    return 0;
  }
  // The recorder first: statics are destroyed in the reverse order of their construction and
  // of atexit's registrations, so finish() runs while it is still alive.
  recorder();
  if (!cupti_ok(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
                "cuptiActivityRegisterCallbacks") ||
      !cupti_ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable"))
    return 0;
  std::atexit(finish);
  return 1;
}
