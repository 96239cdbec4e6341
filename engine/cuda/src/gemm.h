#pragma once
// Linear layers through cuBLASLt: y[rows, out] (fp32) = x[rows, in] w[out, in]^T (+ y), with x and
// w in bf16 (fp32 accumulation) or fp32 (no TF32). One plan (descriptors and the heuristic's
// algorithm) per shape, created on first use and kept: capture-safe afterwards. tune() replaces
// a plan's algorithm by the fastest of the heuristic's candidates, timed on real buffers.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "device_memory.h"
#include "dice/engine/cuda_backend.h"

namespace dice::engine::cuda {

using GemmChoice = CudaGemmChoice;

class Gemm {
 public:
  /// Creates the cuBLASLt handle and a workspace of `workspace_bytes`.
  explicit Gemm(std::size_t workspace_bytes = 64ull << 20);
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  ~Gemm();

  /// y = x w^T, or y += x w^T with `accumulate` (y read and written in place). Pointers 256-byte
  /// aligned (cudaMalloc'd buffers and row offsets of whole matrices). Throws dice::Error naming
  /// the shape when cuBLASLt has no algorithm for it or fails.
  void run(CudaDType dtype, const void* x, const void* w, float* y, std::int64_t rows,
           std::int64_t in, std::int64_t out, bool accumulate, cudaStream_t stream);

  std::size_t workspace_bytes() const { return workspace_.bytes(); }

  /// Times up to `candidates` algorithms of cublasLtMatmulAlgoGetHeuristic for this shape, each
  /// `repeats` times (CUDA events on `stream`) after one run from y = 0 on random x whose
  /// output is hashed, and keeps in the shape's plan the fastest of those whose output is bit
  /// for bit the heuristic's first choice's: results (and seeded sampling) do not depend on
  /// timing noise. x and y are overwritten: callers pass buffers whose contents are dead.
  /// Once per shape (later calls return at once); not during stream capture. Returns the
  /// seconds spent. Throws dice::Error on CUDA failures.
  double tune(CudaDType dtype, void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
              std::int64_t out, bool accumulate, cudaStream_t stream, int candidates = 16,
              int repeats = 3);
  /// Whether tune() ran for this shape.
  bool tuned(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
             bool accumulate) const;
  /// The tuned shapes' choices, in shape order.
  std::vector<GemmChoice> choices() const;

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool tuned = false;
    GemmChoice choice;
  };
  using Key = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, bool>;
  const Plan& plan(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
                   bool accumulate);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  DeviceBuffer hash_;  ///< the autotune's output hash
  std::map<Key, Plan> plans_;
};

}  // namespace dice::engine::cuda
