// CUDA error checks and the RAII owners of device_memory.h.

#include "device_memory.h"

#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "cuda_check.h"
#include "dice/core/error.h"

namespace dice::engine::cuda {

void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw Error(fmt::format("CUDA error at {}:{}: {}: {} ({})", file, line, call,
                          cudaGetErrorName(status), cudaGetErrorString(status)));
}

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(fmt::format("cuBLAS error at {}:{}: {}: {} ({})", file, line, call,
                          cublasLtGetStatusName(status), cublasLtGetStatusString(status)));
}

template <MemoryKind Kind>
CudaBuffer<Kind>::CudaBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  constexpr bool kDevice = Kind == MemoryKind::kDevice;
  const cudaError_t status = kDevice ? cudaMalloc(&data_, bytes) : cudaMallocHost(&data_, bytes);
  if (status != cudaSuccess) {
    data_ = nullptr;
    bytes_ = 0;
    throw Error(fmt::format("CUDA: cannot allocate {:.3f} GiB ({} bytes) of {} memory: {}",
                            static_cast<double>(bytes) / (1 << 30), bytes,
                            kDevice ? "device" : "pinned host", cudaGetErrorString(status)));
  }
  if constexpr (kDevice) DICE_CUDA_CHECK(cudaMemset(data_, 0, bytes));
}

template <MemoryKind Kind>
void CudaBuffer<Kind>::release() noexcept {
  if (data_ != nullptr) {
    if constexpr (Kind == MemoryKind::kDevice)
      cudaFree(data_);
    else
      cudaFreeHost(data_);
  }
  data_ = nullptr;
  bytes_ = 0;
}

template class CudaBuffer<MemoryKind::kDevice>;
template class CudaBuffer<MemoryKind::kPinned>;

Stream::Stream() {
  DICE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

Stream::~Stream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void Stream::synchronize() const {
  DICE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

Event::Event() {
  DICE_CUDA_CHECK(cudaEventCreate(&event_));
}

Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

void Event::record(cudaStream_t stream) const {
  DICE_CUDA_CHECK(cudaEventRecord(event_, stream));
}

void Event::synchronize() const {
  DICE_CUDA_CHECK(cudaEventSynchronize(event_));
}

float Event::since(const Event& start) const {
  float ms = 0;
  DICE_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

GraphExec::GraphExec(cudaGraph_t graph) {
  const cudaError_t status = cudaGraphInstantiate(&exec_, graph, 0);
  cudaGraphDestroy(graph);
  if (status != cudaSuccess) exec_ = nullptr;
  DICE_CUDA_CHECK(status);
}

GraphExec capture_graph(cudaStream_t stream, const std::function<void()>& enqueue,
                        const std::function<void(cudaGraph_t)>& edit) {
  // The captured graph is destroyed on every way out but the last (GraphExec takes it there).
  using Owned = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, cudaError_t (*)(cudaGraph_t)>;
  const auto end_capture = [&] {
    cudaGraph_t graph = nullptr;
    const cudaError_t status = cudaStreamEndCapture(stream, &graph);
    return std::pair(Owned(graph, &cudaGraphDestroy), status);
  };
  DICE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue();
  } catch (...) {
    end_capture();
    throw;
  }
  auto [graph, status] = end_capture();
  DICE_CUDA_CHECK(status);
  if (edit) edit(graph.get());
  return GraphExec(graph.release());
}

namespace {

/// The kernel name of kernel node `node`: "" for another node type, "?" for a kernel whose name
/// the runtime cannot give (a library's, launched through the driver API).
std::string kernel_name(cudaGraphNode_t node) {
  cudaGraphNodeType type{};
  DICE_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
  if (type != cudaGraphNodeTypeKernel) return {};
  // A kernel launched through the driver API (cuBLASLt's) has no runtime function: the runtime
  // reports an invalid device function (not a sticky error), and the kernel is named "?".
  cudaKernelNodeParams params{};
  const char* name = nullptr;
  const cudaError_t got = cudaGraphKernelNodeGetParams(node, &params);
  if (got == cudaErrorInvalidDeviceFunction ||
      (got == cudaSuccess && cudaFuncGetName(&name, params.func) != cudaSuccess)) {
    (void)cudaGetLastError();
    return "?";
  }
  DICE_CUDA_CHECK(got);
  return name != nullptr ? name : "?";
}

}  // namespace

int start_early_after_foreign_kernels(cudaGraph_t graph, std::string_view own) {
  std::size_t count = 0;
  DICE_CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> from(count), to(count);
  std::vector<cudaGraphEdgeData> data(count);
  DICE_CUDA_CHECK(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &count));
  // The edges changed: a PDL launch's programmatic one (from the port that a foreign kernel,
  // which never triggers, activates at its end). Its target was launched with the PDL attribute,
  // which launch.cuh gives only to kernels that wait before they touch anything; a plain edge
  // (a plain launch) is left alone, whatever its kernel's name.
  cudaGraphEdgeData pdl{}, early{};
  pdl.from_port = cudaGraphKernelNodePortProgrammatic;
  pdl.type = cudaGraphDependencyTypeProgrammatic;
  early.from_port = cudaGraphKernelNodePortLaunchCompletion;
  early.type = cudaGraphDependencyTypeProgrammatic;
  // Whether each source node is a foreign kernel, asked once however many edges it has.
  std::unordered_map<cudaGraphNode_t, bool> foreign;
  const auto is_foreign = [&](cudaGraphNode_t node) {
    const auto [it, added] = foreign.try_emplace(node, false);
    if (added) {
      const std::string name = kernel_name(node);
      it->second = !name.empty() && name.find(own) == std::string::npos;
    }
    return it->second;
  };
  int changed = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (std::memcmp(&data[i], &pdl, sizeof pdl) != 0 || !is_foreign(from[i])) continue;
    DICE_CUDA_CHECK(cudaGraphRemoveDependencies(graph, &from[i], &to[i], &data[i], 1));
    DICE_CUDA_CHECK(cudaGraphAddDependencies(graph, &from[i], &to[i], &early, 1));
    ++changed;
  }
  return changed;
}

void GraphExec::launch(cudaStream_t stream) const {
  DICE_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
}

void GraphExec::release() noexcept {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  exec_ = nullptr;
}

}  // namespace dice::engine::cuda
