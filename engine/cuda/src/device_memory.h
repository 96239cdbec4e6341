#pragma once
// RAII owners of device and pinned host memory, streams, events and graphs.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>

#include "cuda_check.h"

namespace dice::engine::cuda {

/// Whether `p` is a multiple of `bytes` (a power of two: 16 for vector loads and bulk copies).
inline bool aligned_to(const void* p, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

/// Where a CudaBuffer's memory lives.
enum class MemoryKind {
  kDevice,  ///< cudaMalloc: zero-filled on allocation (stale values are never NaN: padded rows of
            ///< a pass read them)
  kPinned,  ///< cudaMallocHost: page-locked host memory (fast, asynchronous copies)
};

/// Memory of `Kind`, freed on destruction. Move-only.
template <MemoryKind Kind>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  /// Allocates `bytes` (0: no allocation). Throws dice::Error naming the size on failure.
  explicit CudaBuffer(std::size_t bytes);
  CudaBuffer(CudaBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  CudaBuffer& operator=(CudaBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  ~CudaBuffer() { release(); }

  void* get() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void release() noexcept;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Device memory (cudaMalloc, zero-filled).
using DeviceBuffer = CudaBuffer<MemoryKind::kDevice>;
/// Page-locked host memory (cudaMallocHost).
using PinnedBuffer = CudaBuffer<MemoryKind::kPinned>;

/// A non-blocking CUDA stream.
class Stream {
 public:
  Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();
  cudaStream_t get() const { return stream_; }
  /// Waits for all work on the stream; throws dice::Error on an asynchronous fault.
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

/// A CUDA event (timing enabled).
class Event {
 public:
  Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) const;
  /// Waits until the event's work is done (cudaEventSynchronize). Throws dice::Error.
  void synchronize() const;
  /// Milliseconds from `start` to this event (both recorded and complete).
  float since(const Event& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

/// An instantiated CUDA graph. Move-only.
class GraphExec {
 public:
  GraphExec() = default;
  /// Takes ownership of `graph` (destroyed here) and instantiates it.
  explicit GraphExec(cudaGraph_t graph);
  GraphExec(GraphExec&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}
  GraphExec& operator=(GraphExec&& other) noexcept {
    if (this != &other) {
      release();
      exec_ = std::exchange(other.exec_, nullptr);
    }
    return *this;
  }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec() { release(); }
  void launch(cudaStream_t stream) const;

 private:
  void release() noexcept;
  cudaGraphExec_t exec_ = nullptr;
};

/// What `enqueue` launches on `stream` (and on streams it forks from and joins back to it),
/// captured in thread-local mode, changed by `edit` (if given) and instantiated. If `enqueue` or
/// `edit` throws, the capture is ended and its graph destroyed before the exception goes on.
/// Throws dice::Error on CUDA failures.
GraphExec capture_graph(cudaStream_t stream, const std::function<void()>& enqueue,
                        const std::function<void(cudaGraph_t)>& edit = {});

/// What the mangled names of dice's kernels (namespace dice::engine::cuda) contain, and no
/// library's: start_early_after_foreign_kernels' `own` for the forward's kernels.
inline constexpr std::string_view kOwnKernelNames = "4dice6engine4cuda";

/// Makes every PDL launch of `graph` that follows a foreign kernel (a kernel node whose
/// (mangled) name lacks `own`, or that the runtime cannot name: a library's, cuBLASLt's, which
/// never triggers its dependents) start early: its programmatic edge from the foreign kernel's
/// programmatic port (activated only at that kernel's end) becomes a programmatic dependency from
/// its launch-completion port (cudaGraphKernelNodePortLaunchCompletion: once every block of the
/// foreign kernel has begun), so the PDL kernel's blocks are scheduled while the library kernel
/// runs its last blocks. Which edges change depends on how their targets were launched, not on
/// names: a PDL launch (launch.cuh's launch_kernel with `pdl`) is one whose kernel waits for its
/// predecessor (griddepcontrol.wait) before it reads or writes anything, which keeps the early
/// start correct; a plain edge (full dependency) is left as it is, and so are edges from our own
/// kernels (they trigger where launch.cuh says). Edges *into* a foreign kernel stay full
/// dependencies: cuBLASLt's kernels (CUDA 13.0) read their inputs without waiting for a
/// programmatic predecessor (bench/results/2026-11-27-cublas-no-wait-h100). Returns the edges
/// changed (0 on a second call). Throws dice::Error on CUDA failures.
int start_early_after_foreign_kernels(cudaGraph_t graph, std::string_view own);

}  // namespace dice::engine::cuda
