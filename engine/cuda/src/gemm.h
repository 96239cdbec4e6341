#pragma once
// Linear layers through cuBLASLt: y[rows, out] (fp32) = x[rows, in] w[out, in]^T (+ y), with x and
// w in bf16 (fp32 accumulation) or fp32 (no TF32). One plan (descriptors and the heuristic's
// algorithm) per shape, created on first use and kept: capture-safe afterwards. tune() replaces
// a plan's algorithm by the fastest of the heuristic's candidates, timed on real buffers.
// bf16 GEMMs of at most `skinny_max_rows` rows that skinny_gemm_fits() accepts run our own
// kernel instead (skinny_gemm.h); tune() then times its n-tile choices (all give the same bits).
// With set_stream_gemm, those of at most 16 rows run the streaming kernel (stream_gemm.h), and
// with set_wgmma, bf16 GEMMs of 17-64 rows the wgmma kernel (wgmma_gemm.h).

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "device_memory.h"
#include "dice/engine/cuda_backend.h"
#include "skinny_gemm.h"
#include "stream_gemm.h"
#include "wgmma_gemm.h"

namespace dice::engine::cuda {

using GemmChoice = CudaGemmChoice;

/// A cuBLASLt algorithm's configuration attribute (the 16-bit cluster and inner shape ids
/// included), or -1 when cuBLASLt cannot read it.
int algo_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t what);

class Gemm {
 public:
  /// Creates the cuBLASLt handle and a workspace of `workspace_bytes` on the current device.
  /// `skinny_max_rows` (0: off, at most kSkinnyRowsLimit): bf16 GEMMs of up to that many rows
  /// that the skinny kernel takes run it; `programmatic_launch`: the skinny kernel is launched
  /// with programmatic dependent launch (launch.cuh; cuBLASLt's kernels never are);
  /// `sm_count_target` (0: every SM): cuBLASLt plans for that many SMs
  /// (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET), leaving the rest to a kernel on another stream.
  /// Throws dice::Error for a limit out of range (a target above the device's SMs included).
  explicit Gemm(std::int64_t skinny_max_rows = 0, bool programmatic_launch = false,
                std::size_t workspace_bytes = 64ull << 20, std::int32_t sm_count_target = 0);
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  ~Gemm();

  /// y = x w^T, or y += x w^T with `accumulate` (y read and written in place). Pointers 256-byte
  /// aligned (cudaMalloc'd buffers and row offsets of whole matrices). `staging`: where the
  /// skinny kernel runs it with early weights (set_programmatic_launch), its warps also copy the
  /// rest of their weight share into shared memory before they wait (launch_skinny_gemm).
  /// `y_ready` (with accumulate): the caller guarantees that y's old values are final once this
  /// launch's blocks start, that is, that the kernel before it lets it start only after its own
  /// programmatic wait, and so on back to y's last writer. The skinny and streaming kernels then
  /// read them before their programmatic wait (CudaBackendOptions::early_residual_reads).
  /// Throws dice::Error naming the shape when cuBLASLt has no algorithm for it or fails.
  void run(CudaDType dtype, const void* x, const void* w, float* y, std::int64_t rows,
           std::int64_t in, std::int64_t out, bool accumulate, cudaStream_t stream,
           SkinnyStaging staging = {}, bool y_ready = false);

  /// y[rows, out] (bf16) = x w^T with x and w bf16, fp32 accumulation rounded once to bf16 in
  /// cuBLASLt's epilogue: half the bytes of run()'s fp32 output for the kernel that reads it
  /// (the gate/up projection before SwiGLU at many rows). Always cuBLASLt (the skinny kernel
  /// writes fp32). Pointers 256-byte aligned. Throws dice::Error naming the shape when
  /// cuBLASLt has no algorithm for it or fails.
  void run_bf16_out(const void* x, const void* w, void* y, std::int64_t rows, std::int64_t in,
                    std::int64_t out, cudaStream_t stream);

  /// Whether run_normed() takes this GEMM: bf16 and, where streams() holds (with the residual in
  /// x's place), stream_norm_fits(); else skinny(), skinny_norm_fits() and one wave (out / (8 n
  /// tiles) <= 2 SMs; every block pays the norm).
  bool fuses_norm(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
                  const GemmNorm& norm, const void* w, const void* y) const;
  /// y = RMSNorm(norm.residual) w^T (y[rows, out] fp32, residual [rows, in] fp32, w [out, in]
  /// bf16) in one skinny or streaming launch whose blocks normalise the rows themselves
  /// (GemmNorm: the same bits as rms_norm_vec_kernel then run()). Throws dice::Error when
  /// fuses_norm() does not hold or the launch fails.
  void run_normed(const GemmNorm& norm, const void* w, float* y, std::int64_t rows, std::int64_t in,
                  std::int64_t out, cudaStream_t stream);

  /// Whether run_swiglu() takes this GEMM: bf16 and skinny() or wgmma() with `act` in y's place.
  bool fuses_swiglu(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
                    const void* x, const void* w, const void* act) const;
  /// act[rows, out / 2] (bf16) = silu(gate) * up of x w^T, whose output columns alternate gate
  /// and up (swiglu.cuh), in one skinny launch with the SwiGLU epilogue: the same bits as run()
  /// into an fp32 buffer then launch_swiglu. With `norm` (fuses_norm() holding for it), x is
  /// RMSNorm(norm->residual) as in run_normed(). Throws dice::Error when fuses_swiglu() (or
  /// fuses_norm()) does not hold or the launch fails.
  void run_swiglu(const void* x, const GemmNorm* norm, const void* w, void* act, std::int64_t rows,
                  std::int64_t in, std::int64_t out, cudaStream_t stream);

  /// Whether later skinny launches use programmatic dependent launch (the constructor's
  /// `programmatic_launch`, changed per pass by the backend) and, with it, load their first
  /// weights before waiting for the kernel before them (launch_skinny_gemm's `early_weights`;
  /// the autotune's timing launches never do).
  void set_programmatic_launch(bool on, bool early_weights = false) {
    pdl_ = on;
    early_weights_ = on && early_weights;
  }

  /// Whether later tune() calls time cuBLASLt's candidates with the L2 cache flushed before each
  /// launch (a memset of twice the L2 in the timed graph, its own time subtracted; at least 8
  /// launches), as the forward runs them, instead of replaying them on warm weights.
  /// CudaBackendOptions::gemm_tune_cold; off by default. Turning it on allocates the flush
  /// target (twice the device's L2, at least 2 MiB; scratch_bytes()) at once, turning it off
  /// frees it. Throws dice::Error when that allocation fails.
  void set_cold_tune(bool on);
  /// Whether tune() times on a cold L2 (set_cold_tune).
  bool cold_tune() const { return l2_flush_.bytes() > 0; }
  /// Device memory this Gemm holds besides the cuBLASLt workspace: cold tuning's flush target
  /// (0 while it is off), bytes.
  std::size_t scratch_bytes() const { return l2_flush_.bytes(); }

  std::size_t workspace_bytes() const { return workspace_.bytes(); }
  std::int64_t skinny_max_rows() const { return skinny_max_rows_; }
  /// Whether run(), run_normed() and run_swiglu() give the skinny kernel's GEMMs of up to
  /// kStreamRowsLimit rows that stream_gemm_fits takes, and whose tiles fill at least `min_fill` of
  /// the blocks' slots (stream_gemm_fill; 0: every shape), to the streaming kernel instead
  /// (stream_gemm.h; other bits than the skinny kernel's, the same run to run). Off by default;
  /// stays off on a device below sm_90 or with less than kStreamSharedBytes of shared memory per
  /// block. `split`: shapes that stream_split_fits takes and whose busiest block sheds at least
  /// kStreamSplitMinSavingK k (stream_split_saving_k) stream on the split walk, whatever their
  /// fill (launch_stream_gemm's `split_slots`, which this Gemm then holds: stream_split_slot_bytes
  /// of its SMs; other bits than whole tiles, the same run to run on one device). Throws
  /// dice::Error for min_fill outside [0, 1] or when the slots cannot be allocated.
  void set_stream_gemm(bool on, double min_fill = 0.0, bool split = false);
  /// Whether run(), run_normed() and run_swiglu() give this GEMM to the streaming kernel
  /// (set_stream_gemm on, skinny(), stream_gemm_fits, stream_gemm_fill at least its min_fill or
  /// the split walk taking it);
  /// with a fused norm, fuses_norm() decides whether the norm goes with it.
  bool streams(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out, const void* x,
               const void* w, const void* y) const;
  /// With the streaming kernel: whole-tile launches without accumulate (qkv, gate/up, lm_head)
  /// whose blocks take at least `min_tiles` 16-column tiles on average deal a share
  /// `dynamic_share` of their tiles at run time (launch_stream_gemm's `dynamic`,
  /// stream_dynamic_static_tiles; the same bits). 0: off (the default). Allocates the counters
  /// this Gemm then holds. Throws dice::Error for a share outside [0, 1), min_tiles below 1, or
  /// a failed allocation.
  void set_stream_dynamic(double dynamic_share, double min_tiles);
  /// Streaming launches that took the dynamic tail so far (eager or captured).
  std::int64_t dynamic_launches() const { return dynamic_launches_; }
  /// GEMMs given to the streaming kernel so far (eager or captured; replays not counted).
  std::int64_t stream_launches() const { return stream_launches_; }
  /// Skinny and streaming launches so far that read y's old values before their programmatic
  /// wait (run()'s y_ready taken; eager or captured, replays not counted).
  std::int64_t early_y_launches() const { return early_y_launches_; }
  /// Skinny launches so far whose warps staged their weight share in shared memory before their
  /// programmatic wait (run()'s `staging`; skinny_launch_staged_chunks).
  std::int64_t staged_launches() const { return staged_launches_; }
  /// Whether run() (and run_swiglu()) give bf16 GEMMs of up to kWgmmaRowsLimit rows that the
  /// skinny kernel does not take to the wgmma kernel (wgmma_gemm.h; tile_n kWgmmaTileN, the
  /// split count of wgmma_default_splits). Off by default; on a device other than sm_90 it stays
  /// off. `min_block_k` (0: every shape): only shapes whose blocks stream at least this much k
  /// (wgmma_block_k, elements) go to it. Throws dice::Error when the wgmma launcher cannot be
  /// made (WgmmaGemm) or `min_block_k` is negative.
  /// `stage_k`: the kernel's k per stage, 64 or 128 (kWgmmaStageK; WgmmaGemm::launch, split
  /// counts 1..wgmma_max_splits(in, stage_k)); shapes whose `in` it does not divide go to
  /// cuBLASLt. Other values throw dice::Error.
  void set_wgmma(bool on, std::int64_t min_block_k = 0, int stage_k = kWgmmaStageK);
  /// Whether run() gives this GEMM to the wgmma kernel (set_wgmma on an sm_90 device, bf16, not
  /// skinny(), wgmma_gemm_fits, a split option at set_wgmma's `stage_k`, wgmma_block_k at least
  /// set_wgmma's `min_block_k`).
  bool wgmma(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out, const void* x,
             const void* w, const void* y) const;
  /// Whether run_folded() takes this GEMM: wgmma() but for set_wgmma's `min_block_k` (the fold
  /// saves a norm launch, so a shape may go to the wgmma kernel that cuBLASLt streams faster).
  bool folds_norm(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
                  const void* x, const void* w, const void* y) const;
  /// y = x w^T (+ y with `accumulate`), or with `act` the SwiGLU epilogue into act as in
  /// run_swiglu(), on the wgmma kernel with the RMSNorm folds `fold` (WgmmaNormFold:
  /// CudaBackendOptions::fold_qkv_norm, fold_mlp_norm). Throws dice::Error when folds_norm() does
  /// not hold (y or act in y's place) or the launch refuses the fold (WgmmaGemm::launch).
  void run_folded(const void* x, const void* w, float* y, void* act, std::int64_t rows,
                  std::int64_t in, std::int64_t out, bool accumulate, const WgmmaNormFold& fold,
                  cudaStream_t stream);
  /// The column tile run_qk_rope() launches with: 64 (the default: a head vector is two tiles in
  /// one cluster) or 128 (one tile). Throws dice::Error for another width.
  void set_qk_rope_tile_n(int tile_n);
  /// Whether run_qk_rope() takes this qkv projection: set_wgmma on an sm_90 device, bf16, not
  /// skinny(), set_wgmma's `stage_k` 128, wgmma_gemm_fits at set_qk_rope_tile_n's tile and a
  /// split count for the rows (wgmma_qk_rope_splits), head_dim 128 and out = (heads + 2 kv_heads)
  /// x 128. Whatever set_wgmma's `min_block_k` says: the epilogue saves the q/k norm + RoPE
  /// launch.
  bool fuses_qk_rope(CudaDType dtype, std::int64_t rows, std::int64_t in, const LayerShape& shape,
                     const void* x, const void* w, const void* q_out) const;
  /// The qkv projection of x [rows, in] (bf16) by w [out, in] with the q/k epilogue (WgmmaQkRope:
  /// q into qk.q_out, k and v into qk.cache, normalised and rotated as launch_qk_norm_rope does;
  /// CudaBackendOptions::fused_qk_norm_rope): no fp32 output. Throws dice::Error when
  /// fuses_qk_rope() does not hold or the launch refuses `qk` (WgmmaGemm::launch).
  void run_qk_rope(const void* x, const void* w, const WgmmaQkRope& qk, std::int64_t rows,
                   std::int64_t in, cudaStream_t stream);
  /// Whether run() gives this GEMM to one of dice's kernels (skinny() or wgmma()), which write
  /// fp32 or the SwiGLU epilogue's bf16, never cuBLASLt's bf16 output.
  bool own_kernel(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
                  const void* x, const void* w, const void* y) const {
    return skinny(dtype, rows, in, out, x, w, y) || wgmma(dtype, rows, in, out, x, w, y);
  }
  /// GEMMs given to the wgmma kernel so far (launched eagerly or into a captured graph; replays
  /// not counted).
  std::int64_t wgmma_launches() const { return wgmma_launches_; }
  /// Whether run() gives this GEMM to the skinny kernel (skinny_gemm_fits with this limit; y the
  /// output, fp32 or the SwiGLU epilogue's bf16).
  bool skinny(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out, const void* x,
              const void* w, const void* y) const;

  /// Times up to `candidates` algorithms of cublasLtMatmulAlgoGetHeuristic for this shape, each
  /// as `repeats` launches captured in one CUDA graph on `stream` (replayed once to warm up,
  /// then once under CUDA events: the launch overhead the forward's graphs do not pay stays
  /// out), after one run from y = 0 on random x whose output is hashed, and keeps in the shape's
  /// plan the fastest of those whose output is bit for bit the heuristic's first choice's: results
  /// (and seeded sampling) do not depend on timing noise. x and y are overwritten: callers pass
  /// buffers whose contents are dead. Once per shape (later calls return at once); not during
  /// stream capture. Returns the seconds spent. Throws dice::Error on CUDA failures. A GEMM that
  /// skinny() takes instead has its n8 tiles per block timed the same way (each `repeats` times)
  /// and the fastest kept; one that streams() takes, or wgmma(), has nothing to time (returns 0).
  /// `bf16_out`: the shape of run_bf16_out() (y then holds rows x out bf16; out even).
  double tune(CudaDType dtype, void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
              std::int64_t out, bool accumulate, cudaStream_t stream, int candidates = 16,
              int repeats = 3, bool bf16_out = false);
  /// Whether tune() ran for this shape.
  bool tuned(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out, bool accumulate,
             bool bf16_out = false) const;
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
  /// (dtype, rows, in, out, accumulate, bf16 output)
  using Key = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, bool, bool>;
  const Plan& plan(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
                   bool accumulate, bool bf16_out = false);

  struct SkinnyPlan {
    int n_tiles = 1;
    bool tuned = false;
    GemmChoice choice;
  };
  double tune_skinny(void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
                     std::int64_t out, bool accumulate, cudaStream_t stream, int repeats);
  /// The wgmma kernel's launch of wgmma() shapes (tile_n kWgmmaTileN, the rule's split count;
  /// `act`: the SwiGLU epilogue's output instead of y), counted in wgmma_launches_.
  void run_wgmma(const void* x, const void* w, float* y, void* act, std::int64_t rows,
                 std::int64_t in, std::int64_t out, bool accumulate, const WgmmaNormFold& fold,
                 cudaStream_t stream);
  /// The streaming kernel's launch of streams() shapes (`act`: the SwiGLU epilogue's output
  /// instead of y; `norm`: its fused RMSNorm, x unread), counted in stream_launches_.
  void run_stream(const void* x, const void* w, float* y, void* act, std::int64_t rows,
                  std::int64_t in, std::int64_t out, bool accumulate, cudaStream_t stream,
                  const GemmNorm* norm = nullptr, bool y_ready = false);
  /// The split count run_qk_rope() launches this qkv projection with (wgmma_qk_rope_splits at
  /// set_qk_rope_tile_n's tile), 0 where fuses_qk_rope() does not hold.
  int qk_rope_splits(CudaDType dtype, std::int64_t rows, std::int64_t in, const LayerShape& shape,
                     const void* x, const void* w, const void* q_out) const;
  /// Whether a shape takes the split walk: set_stream_gemm's `split` and stream_split_saving_k
  /// (0 where stream_split_fits does not hold) at least kStreamSplitMinSavingK on this device's
  /// SMs.
  bool stream_splits(std::int64_t in, std::int64_t out) const;
  /// The n8 tiles the skinny kernel runs this shape with (tuned, else the default).
  int skinny_n_tiles(std::int64_t rows, std::int64_t in, std::int64_t out, bool accumulate) const;

  std::int64_t skinny_max_rows_ = 0;
  bool pdl_ = false;
  bool early_weights_ = false;
  std::optional<WgmmaGemm> wgmma_;  ///< made by set_wgmma(true) on an sm_90 device
  std::int64_t wgmma_launches_ = 0;
  bool stream_ = false;           ///< set_stream_gemm
  double stream_min_fill_ = 0.0;  ///< set_stream_gemm
  std::int64_t stream_launches_ = 0;
  std::int64_t early_y_launches_ = 0;      ///< early_y_launches()
  std::int64_t staged_launches_ = 0;       ///< staged_launches()
  DeviceBuffer stream_split_slots_;        ///< set_stream_gemm's `split`: the split walk's slots
  DeviceBuffer stream_dynamic_counters_;   ///< set_stream_dynamic's counters
  double stream_dynamic_share_ = 0.0;      ///< set_stream_dynamic
  double stream_dynamic_min_tiles_ = 1.0;  ///< set_stream_dynamic
  std::int64_t dynamic_launches_ = 0;      ///< dynamic_launches()
  std::int64_t wgmma_min_block_k_ = 0;     ///< set_wgmma
  int wgmma_stage_k_ = kWgmmaStageK;       ///< set_wgmma
  int qk_rope_tile_n_ = CudaBackendOptions{}.fused_qk_norm_rope_tile_n;  ///< set_qk_rope_tile_n
  int sms_ = 1;
  std::int32_t sm_count_target_ = 0;
  DeviceBuffer l2_flush_;  ///< cold tuning's flush target, empty while it is off (set_cold_tune)
  std::map<Key, SkinnyPlan> skinny_;
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  DeviceBuffer hash_;  ///< the autotune's output hash
  std::map<Key, Plan> plans_;
};

}  // namespace dice::engine::cuda
