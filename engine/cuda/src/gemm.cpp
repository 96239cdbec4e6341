#include "gemm.h"

#include <fmt/format.h>

#include "cuda_check.h"
#include "dice/core/error.h"

namespace dice::engine::cuda {

Gemm::Gemm(std::size_t workspace_bytes) : workspace_(workspace_bytes) {
  DICE_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

Gemm::~Gemm() {
  for (auto& [key, p] : plans_) {
    if (p.c != nullptr) cublasLtMatrixLayoutDestroy(p.c);
    if (p.b != nullptr) cublasLtMatrixLayoutDestroy(p.b);
    if (p.a != nullptr) cublasLtMatrixLayoutDestroy(p.a);
    if (p.desc != nullptr) cublasLtMatmulDescDestroy(p.desc);
  }
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

const Gemm::Plan& Gemm::plan(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
                             bool accumulate) {
  const Key key{static_cast<int>(dtype), rows, in, out, accumulate};
  if (const auto it = plans_.find(key); it != plans_.end()) return it->second;
  // Column-major view: D (out x rows, ld out) = op(A) B with A = w stored as (in x out, ld in),
  // op(A) = A^T, and B = x stored as (in x rows, ld in).
  const cudaDataType_t type = dtype == CudaDType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
  Plan p;
  try {
    DICE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
    DICE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                     &transpose, sizeof transpose));
    DICE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none));
    DICE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, type, static_cast<std::uint64_t>(in),
                                                 static_cast<std::uint64_t>(out), in));
    DICE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, type, static_cast<std::uint64_t>(in),
                                                 static_cast<std::uint64_t>(rows), in));
    DICE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, static_cast<std::uint64_t>(out),
                                                 static_cast<std::uint64_t>(rows), out));
    cublasLtMatmulPreference_t preference = nullptr;
    DICE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    const std::uint64_t bytes = workspace_.bytes();
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = [&] {
      const cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
          preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes);
      if (s != CUBLAS_STATUS_SUCCESS) return s;
      return cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, preference, 1,
                                            &result, &found);
    }();
    cublasLtMatmulPreferenceDestroy(preference);
    DICE_CUBLAS_CHECK(status);
    if (found == 0)
      throw Error(fmt::format("cuBLASLt has no algorithm for {} GEMM rows {} in {} out {}",
                              dtype == CudaDType::kBF16 ? "bf16" : "fp32", rows, in, out));
    p.algo = result.algo;
  } catch (...) {
    if (p.c != nullptr) cublasLtMatrixLayoutDestroy(p.c);
    if (p.b != nullptr) cublasLtMatrixLayoutDestroy(p.b);
    if (p.a != nullptr) cublasLtMatrixLayoutDestroy(p.a);
    if (p.desc != nullptr) cublasLtMatmulDescDestroy(p.desc);
    throw;
  }
  return plans_.emplace(key, p).first->second;
}

void Gemm::run(CudaDType dtype, const void* x, const void* w, float* y, std::int64_t rows,
               std::int64_t in, std::int64_t out, bool accumulate, cudaStream_t stream) {
  if (rows <= 0) return;
  const Plan& p = plan(dtype, rows, in, out, accumulate);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  DICE_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c,
                                   &p.algo, workspace_.get(), workspace_.bytes(), stream));
}

}  // namespace dice::engine::cuda
