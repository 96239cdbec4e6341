#pragma once
// The --backend family of options shared by `dice generate` and `dice engine`: which forward
// implementation runs (CPU reference or CUDA) and how it is sized.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "dice/engine/backend.h"
#include "dice/engine/cuda_options.h"

namespace dice::model {
class Checkpoint;
}

namespace dice::cli {

/// Backend choice and sizing, as given on the command line.
struct BackendArgs {
  std::string backend =
      "auto";              ///< auto (cuda when built with CUDA and a GPU is present), cpu, cuda
  int threads = 0;         ///< cpu: worker threads (0: every core)
  std::string gpu_memory;  ///< cuda: device memory the backend may take ("40GB", "37.5GiB", bytes)
  std::string dtype = "bf16";      ///< cuda: bf16 or fp32 (exactness tests)
  std::string attention = "auto";  ///< cuda: auto, tensor-cores, cuda-cores
  bool no_cuda_graphs = false;
  bool baseline_kernels = false;  ///< cuda: the first small-batch kernel layouts (before/after)
  bool no_gemm_autotune = false;  ///< cuda: keep cuBLASLt's heuristic choice for every GEMM
  /// cuda: programmatic dependent launch of dice's kernels in every pass (--pdl), in none
  /// (--no-pdl); neither: in passes of at most skinny_gemm_rows rows
  bool pdl = false;
  bool no_pdl = false;
  /// cuda: the kernel switches the flags set directly (--skinny-gemm-rows,
  /// --no-pipelined-attention, --no-balanced-attention-plan, --no-paired-attention-tiles,
  /// --attention-split-cost, --attention-max-splits, --attention-min-split-keys,
  /// --no-deep-attention-pipeline,
  /// --fused-norm-gemm, --no-fused-swiglu, --no-bf16-gate-up, --no-pdl-early-reads,
  /// --no-masked-rows-only), with the backend's own defaults; make_backend() sets the rest
  engine::CudaBackendOptions cuda;
};

/// Registers --backend, --threads, --gpu-memory, --cuda-dtype, --cuda-attention, --no-cuda-graphs,
/// --cuda-baseline-kernels, --no-gemm-autotune, --skinny-gemm-rows, --pdl, --no-pdl,
/// --pipelined-attention / --no-pipelined-attention, --balanced-attention-plan /
/// --no-balanced-attention-plan, --paired-attention-tiles / --no-paired-attention-tiles,
/// --attention-split-cost, --attention-max-splits, --attention-min-split-keys,
/// --deep-attention-pipeline /
/// --no-deep-attention-pipeline,
/// --fused-norm-gemm / --no-fused-norm-gemm, --fused-swiglu /
/// --no-fused-swiglu, --bf16-gate-up / --no-bf16-gate-up, --pdl-early-reads / --no-pdl-early-reads,
/// --masked-rows-only /
/// --no-masked-rows-only.
void add_backend_options(CLI::App* command, BackendArgs& args);

/// "cpu" or "cuda" for --backend auto|cpu|cuda. Throws dice::InputError for cuda when dice was
/// built without CUDA or no device is present, and for an unknown name.
std::string resolve_backend(const BackendArgs& args);

/// A backend over `checkpoint`'s weights (copied: the checkpoint may close afterwards), and a
/// one-line description for logs ("cuda: NVIDIA H100 ..., bf16, KV cache 1.2M tokens").
/// Throws dice::InputError for bad options and what the backend's constructor throws.
std::unique_ptr<engine::Backend> make_backend(const BackendArgs& args,
                                              const model::Checkpoint& checkpoint,
                                              std::string* description = nullptr);

/// Bytes from "40GB" (10^9), "40GiB" (2^30), "512MB", "512MiB" or a plain number of bytes.
/// Throws dice::InputError naming `what`.
std::int64_t parse_bytes(std::string_view text, std::string_view what);

}  // namespace dice::cli
