// CudaBackend: weights upload, the paged KV cache, forward planning and the per-pass launch
// sequence (eager or as a replayed CUDA graph). The kernels are in the .cu files beside.

#include "dice/engine/cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include "cuda_check.h"
#include "device_memory.h"
#include "device_query.h"
#include "dice/core/error.h"
#include "dice/engine/cpu_backend.h"
#include "dice/model/checkpoint.h"
#include "dice/model/dtype.h"
#include "forward_plan.h"
#include "gemm.h"
#include "norm_fold.h"
#include "ops.h"

namespace dice::engine {

namespace {

using namespace cuda;

constexpr std::int32_t kMaxPartials = 4096;
constexpr std::size_t kAlign = 256;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

std::size_t align_up(std::size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

double gib(std::int64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(1ll << 30);
}

/// A tensor on the host: fp32 values, or raw bf16 bits when the source has them.
struct HostTensor {
  std::vector<float> f32;
  std::vector<std::uint16_t> bf16;
  std::size_t size() const { return f32.empty() ? bf16.size() : f32.size(); }
};

/// Where the weights come from: a tensor by its Hugging Face name.
struct WeightSource {
  model::ModelConfig config;
  std::function<HostTensor(const std::string& name, bool want_bf16)> get;
};

WeightSource checkpoint_source(const model::Checkpoint& checkpoint) {
  return {checkpoint.config(), [&checkpoint](const std::string& name, bool want_bf16) {
            const model::TensorView& view = checkpoint.tensor(name);
            HostTensor t;
            if (want_bf16 && view.dtype == model::DType::kBF16) {
              t.bf16.resize(static_cast<std::size_t>(view.numel()));
              std::memcpy(t.bf16.data(), view.data.data(), view.data.size());
            } else {
              t.f32 = view.to_f32();
            }
            return t;
          }};
}

WeightSource cpu_source(const CpuWeights& w) {
  return {w.config, [&w](const std::string& name, bool) {
            HostTensor t;
            const auto layer_field = [&](const CpuLayerWeights& l,
                                         const std::string& rest) -> const std::vector<float>& {
              if (rest == "input_layernorm.weight") return l.input_layernorm;
              if (rest == "self_attn.q_proj.weight") return l.q_proj;
              if (rest == "self_attn.k_proj.weight") return l.k_proj;
              if (rest == "self_attn.v_proj.weight") return l.v_proj;
              if (rest == "self_attn.o_proj.weight") return l.o_proj;
              if (rest == "self_attn.q_norm.weight") return l.q_norm;
              if (rest == "self_attn.k_norm.weight") return l.k_norm;
              if (rest == "post_attention_layernorm.weight") return l.post_attention_layernorm;
              if (rest == "mlp.gate_proj.weight") return l.gate_proj;
              if (rest == "mlp.up_proj.weight") return l.up_proj;
              if (rest == "mlp.down_proj.weight") return l.down_proj;
              throw Error("CUDA backend: no CPU weight " + rest);
            };
            if (name == "model.embed_tokens.weight") {
              t.f32 = w.embed_tokens;
            } else if (name == "model.norm.weight") {
              t.f32 = w.norm;
            } else if (name == "lm_head.weight") {
              t.f32 = w.lm_head;
            } else {
              const std::string prefix = "model.layers.";
              const std::size_t dot = name.find('.', prefix.size());
              const auto layer = std::stoul(name.substr(prefix.size(), dot - prefix.size()));
              t.f32 = layer_field(w.layers.at(layer), name.substr(dot + 1));
            }
            return t;
          }};
}

/// Parameters of one layer's weight matrices: q/k/v, o, gate/up and down.
std::int64_t layer_matrix_params(const model::ModelConfig& c) {
  const std::int64_t hd = c.hidden_size, qd = c.num_heads * c.head_dim,
                     kvd = c.num_kv_heads * c.head_dim, in = c.intermediate_size;
  return (qd + 2 * kvd) * hd + hd * qd + 2 * in * hd + hd * in;
}

/// Bytes of KV cache one cached position takes: K and V of every layer, `elem` bytes a value.
std::int64_t kv_position_bytes(const model::ModelConfig& c, std::int64_t elem) {
  return c.num_layers * 2 * c.num_kv_heads * c.head_dim * elem;
}

}  // namespace

struct CudaBackend::Impl {
  struct Layer {
    DeviceBuffer qkv, o, gate_up, down;                  // dtype
    DeviceBuffer input_norm, post_norm, q_norm, k_norm;  // fp32
  };
  struct Sequence {
    std::int32_t block_length = 1;
    std::int64_t length = 0;
    std::vector<std::int32_t> pages;
    std::int64_t last_forward = 0;  ///< the forward_serial of the last forward naming it
  };
  /// Padded rows, padded block rows, a combine launch, the pass's attention kernel.
  using GraphKey = std::tuple<std::int32_t, std::int32_t, bool, AttentionKernel>;

  CudaBackendOptions options;
  model::ModelConfig config;
  LayerShape shape{};
  CudaDType dtype = CudaDType::kBF16;
  std::size_t elem = 2;
  AttentionKernel attention = AttentionKernel::kTensorCoresPipelined;
  std::int32_t sms = 0;
  std::int32_t attn_grid = 0;
  /// Blocks of the deep attention kernel (attention_deep_pipeline), 0 when it is not used.
  std::int32_t deep_grid = 0;
  /// Blocks of the paired attention kernel (attention_paired_tiles), 0 when it is not used.
  std::int32_t paired_grid = 0;
  /// Blocks of the deep paired attention kernel (attention_deep_pairs), 0 when it is not used.
  std::int32_t deep_paired_grid = 0;
  /// The deep paired kernel of attention_deep_pairs_warps.
  AttentionKernel deep_paired_kernel = AttentionKernel::kTensorCoresDeepPaired;
  std::int32_t combine_grid = 0;
  std::int64_t max_positions = 0;
  std::int32_t rows_cap = 0;
  std::int32_t block_rows_cap = 0;
  CudaMemoryReport memory;
  /// Plans every pass, its buffers kept between forwards.
  PassPlanner planner;
  CudaForwardStats stats;
  std::int64_t weight_bytes_per_pass = 0;
  std::int64_t kv_bytes_per_position = 0;
  double copy_bandwidth = 0;
  double gemm_rate = 0;
  double sustained_gemm_rate = 0;
  double gemm_tune_seconds = 0;  ///< spent by the GEMM autotune so far
  /// The host clock's last lap mark (the host_*_seconds of CudaForwardStats).
  std::chrono::steady_clock::time_point host_mark;

  /// Adds the host time since the last mark to `part` (a host_*_seconds of stats); marks now.
  void host_lap(double& part) {
    const auto now = std::chrono::steady_clock::now();
    part += std::chrono::duration<double>(now - host_mark).count();
    host_mark = now;
  }

  std::unique_ptr<Stream> stream;
  std::unique_ptr<Event> pass_start, pass_end;  ///< around each pass (stats.device_seconds)
  std::unique_ptr<Gemm> gemm;
  DeviceBuffer embed, lm_head, final_norm, rope;
  std::vector<Layer> layers;
  DeviceBuffer x, h, qkv, q, attn, gate_up, act, hn, logits, partial_out, partial_lse, proposals;
  DeviceBuffer square_sums;  // fp32 [rows, hidden / 64]: the folded norms' (norm_fold.h)
  // The chunked vocabulary pass's scratch (VocabWorkspace).
  DeviceBuffer vocab_partials, vocab_counters, vocab_bin_counts, vocab_bin_masses;
  DeviceBuffer attn_counters;  // the pipelined attention's merge counters
  DeviceBuffer meta;
  PinnedBuffer meta_host, proposals_host;
  DeviceBuffer k_cache, v_cache;
  std::int64_t pages = 0;
  std::vector<std::int32_t> free_pages;
  std::map<SequenceId, Sequence> sequences;
  /// Counts forward() calls (check()'s duplicate test: Sequence::last_forward).
  std::int64_t forward_serial = 0;
  /// forward()'s sequence of each item, looked up once by check() (kept for its capacity).
  std::vector<Sequence*> item_sequences;
  std::map<GraphKey, GraphExec> graphs;

  Impl(const WeightSource& source, CudaBackendOptions opts) : options(opts), config(source.config) {
    if (cuda_device_count() <= options.device)
      throw Error(fmt::format("CUDA backend: no CUDA device {} (devices found: {})", options.device,
                              cuda_device_count()));
    DICE_CUDA_CHECK(cudaSetDevice(options.device));
    dtype = options.dtype;
    elem = dtype == CudaDType::kBF16 ? 2 : 4;
    const bool tensor_cores =
        options.attention == CudaAttention::kTensorCores ||
        (options.attention == CudaAttention::kAuto && dtype == CudaDType::kBF16);
    if (tensor_cores && dtype != CudaDType::kBF16)
      throw Error("CUDA backend: the tensor-core attention needs bf16 (dtype is fp32)");
    if (options.stage_o_batch_rounds < 0 || options.stage_o_batch_rounds > kStageBatchRoundsLimit)
      throw Error(fmt::format("CUDA backend: stage_o_batch_rounds {}: expected 0..{}",
                              options.stage_o_batch_rounds, kStageBatchRoundsLimit));
    if (options.attention_deep_pairs_warps != 4 && options.attention_deep_pairs_warps != 8)
      throw Error(fmt::format("CUDA backend: attention_deep_pairs_warps {}: expected 4 or 8",
                              options.attention_deep_pairs_warps));
    attention = !tensor_cores                 ? AttentionKernel::kCudaCores
                : options.pipelined_attention ? AttentionKernel::kTensorCoresPipelined
                                              : AttentionKernel::kTensorCores;
    validate_shape();
    shape = LayerShape{static_cast<std::int32_t>(config.hidden_size),
                       static_cast<std::int32_t>(config.num_heads),
                       static_cast<std::int32_t>(config.num_kv_heads),
                       static_cast<std::int32_t>(config.head_dim),
                       static_cast<std::int32_t>(config.intermediate_size),
                       config.rms_norm_eps};
    max_positions = config.max_position_embeddings;

    cudaDeviceProp prop{};
    DICE_CUDA_CHECK(cudaGetDeviceProperties(&prop, options.device));
    sms = prop.multiProcessorCount;
    std::size_t free_bytes = 0, total_bytes = 0;
    DICE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    memory.device_name = prop.name;
    memory.device_total = static_cast<std::int64_t>(total_bytes);
    memory.free_at_start = static_cast<std::int64_t>(free_bytes);
    const auto margin = std::max<std::int64_t>(1ll << 30, memory.device_total / 20);
    const std::int64_t usable = memory.free_at_start - (256ll << 20);
    memory.budget = options.memory_limit_bytes > 0 ? std::min(options.memory_limit_bytes, usable)
                                                   : memory.free_at_start - margin;
    if (memory.budget <= 0) {
      // Nothing is left before any upload: say why instead of reporting a negative budget.
      if (options.memory_limit_bytes > 0)
        throw Error(fmt::format(
            "CUDA backend: only {:.2f} GiB of {:.2f} GiB are free on {}, not more than the "
            "0.25 GiB kept for the CUDA context and libraries; another process or CUDA backend "
            "holds the memory: free the device",
            gib(memory.free_at_start), gib(memory.device_total), memory.device_name));
      throw Error(fmt::format(
          "CUDA backend: only {:.2f} GiB of {:.2f} GiB are free on {}, not more than the {:.2f} "
          "GiB (5% of the card, at least 1 GiB) that sizing by the free memory leaves free; "
          "another process or CUDA backend holds the memory (every backend without a limit takes "
          "the rest of the card): free the device or give each backend a limit (--gpu-memory, "
          "CudaBackendOptions::memory_limit_bytes)",
          gib(memory.free_at_start), gib(memory.device_total), memory.device_name, gib(margin)));
    }

    stream = std::make_unique<Stream>();
    pass_start = std::make_unique<Event>();
    pass_end = std::make_unique<Event>();
    gemm = std::make_unique<Gemm>(options.skinny_gemm_rows, options.programmatic_launch);
    // Unset: the device's rule; options() then report the limit taken.
    if (!options.wgmma_min_block_k)
      options.wgmma_min_block_k = wgmma_auto_min_block_k(device_peak_bandwidth(), sms);
    gemm->set_wgmma(options.wgmma_gemm, *options.wgmma_min_block_k, options.wgmma_stage_k);
    gemm->set_qk_rope_tile_n(options.fused_qk_norm_rope_tile_n);
    // With fused_norm_gemm the streaming kernel normalises its rows itself where it can
    // (Gemm::fuses_norm), the same bits as the norm kernel before it.
    gemm->set_stream_gemm(options.stream_gemm, options.stream_gemm_min_fill,
                          options.stream_gemm_split);
    gemm->set_stream_dynamic(options.stream_dynamic_share, options.stream_dynamic_min_tiles);
    gemm->set_cold_tune(options.gemm_tune_cold && options.gemm_autotune &&
                        dtype == CudaDType::kBF16);
    upload_weights(source);
    build_rope();
    allocate_workspace();
    allocate_cache();
    attn_grid = attention_grid(dtype, attention, shape.head_dim);
    if (attn_grid == 0)
      throw Error(fmt::format(
          "CUDA backend: the configured attention kernel (CudaBackendOptions::attention) needs "
          "more shared memory per block than {} allows; choose another attention kernel",
          memory.device_name));
    // attention_grid also raises each kernel's shared memory limit: every kernel a pass may
    // launch gets it here. The deep and paired kernels stay off (grid 0) on a device whose
    // blocks cannot opt in to their shared memory.
    if (options.attention_deep_pipeline && attention == AttentionKernel::kTensorCoresPipelined)
      deep_grid = attention_grid(dtype, AttentionKernel::kTensorCoresDeep, shape.head_dim);
    if (options.attention_paired_tiles && attention == AttentionKernel::kTensorCoresPipelined)
      paired_grid = attention_grid(dtype, AttentionKernel::kTensorCoresPaired, shape.head_dim);
    deep_paired_kernel = options.attention_deep_pairs_warps == 8
                             ? AttentionKernel::kTensorCoresDeepPaired8
                             : AttentionKernel::kTensorCoresDeepPaired;
    if (options.attention_deep_pairs && options.attention_paired_tiles && deep_grid > 0)
      deep_paired_grid = attention_grid(dtype, deep_paired_kernel, shape.head_dim);
    combine_grid = sms * 4;
  }

  void validate_shape() const {
    const auto& c = config;
    if (c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 ||
        c.intermediate_size <= 0 || c.vocab_size <= 0 || c.num_heads % c.num_kv_heads != 0)
      throw Error("CUDA backend: model sizes out of range");
    if (!attention_supports(static_cast<std::int32_t>(c.head_dim)))
      throw Error(fmt::format("CUDA backend: head_dim {} is not supported (16, 32, 64, 128, 256)",
                              c.head_dim));
    if (kTileQueries % (c.num_heads / c.num_kv_heads) != 0)
      throw Error(
          fmt::format("CUDA backend: {} query heads per KV head is not supported (a divisor of 16)",
                      c.num_heads / c.num_kv_heads));
    if (c.hidden_size % 8 != 0 || c.intermediate_size % 8 != 0)
      throw Error(fmt::format(
          "CUDA backend: hidden size {} and intermediate size {} must be multiples of 8",
          c.hidden_size, c.intermediate_size));
  }

  /// Tensor `name`'s values on the host as bf16 (2 bytes each) or fp32 (4 bytes), converted in
  /// `t` where the checkpoint stores the other one; t.size() of them. Throws dice::Error (naming
  /// the tensor) when it does not hold `count` values.
  static const void* host_values(const WeightSource& source, const std::string& name,
                                 std::int64_t count, bool bf16, HostTensor& t) {
    t = source.get(name, bf16);
    if (static_cast<std::int64_t>(t.size()) != count)
      throw Error(fmt::format("CUDA backend: {} holds {} values, the config needs {}", name,
                              t.size(), count));
    if (bf16) {
      if (t.bf16.empty()) {
        t.bf16.resize(t.f32.size());
        for (std::size_t i = 0; i < t.f32.size(); ++i) t.bf16[i] = model::f32_to_bf16(t.f32[i]);
      }
      return t.bf16.data();
    }
    if (t.f32.empty()) {
      t.f32.resize(t.bf16.size());
      for (std::size_t i = 0; i < t.bf16.size(); ++i) t.f32[i] = model::bf16_to_f32(t.bf16[i]);
    }
    return t.f32.data();
  }

  /// Allocates the compute dtype for the tensors `names`, `counts` values each, and uploads them
  /// one after the other (each tensor's rows follow the previous one's). Throws dice::Error
  /// naming a tensor whose size is not its count.
  DeviceBuffer upload(const WeightSource& source, const std::vector<std::string>& names,
                      const std::vector<std::int64_t>& counts) {
    std::int64_t total = 0;
    for (const std::int64_t n : counts) total += n;
    DeviceBuffer buffer(align_up(static_cast<std::size_t>(total) * elem));
    std::size_t offset = 0;
    HostTensor t;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const void* values = host_values(source, names[i], counts[i], dtype == CudaDType::kBF16, t);
      DICE_CUDA_CHECK(cudaMemcpy(static_cast<char*>(buffer.get()) + offset, values, t.size() * elem,
                                 cudaMemcpyHostToDevice));
      offset += t.size() * elem;
    }
    memory.weights += static_cast<std::int64_t>(buffer.bytes());
    return buffer;
  }

  /// Two [rows, cols] matrices as one [2 rows, cols] whose rows alternate: row 2i is a's row i,
  /// row 2i + 1 is b's (the gate/up projection's layout, swiglu.cuh), copied from the host with
  /// a row pitch of two rows. Throws dice::Error naming a tensor that is not rows x cols.
  DeviceBuffer upload_interleaved(const WeightSource& source, const std::string& a,
                                  const std::string& b, std::int64_t rows, std::int64_t cols) {
    DeviceBuffer both(align_up(static_cast<std::size_t>(2 * rows * cols) * elem));
    const auto row_bytes = static_cast<std::size_t>(cols) * elem;
    HostTensor t;
    for (const auto& [name, first] : {std::pair{a, 0}, std::pair{b, 1}}) {
      const void* values = host_values(source, name, rows * cols, dtype == CudaDType::kBF16, t);
      DICE_CUDA_CHECK(cudaMemcpy2D(static_cast<char*>(both.get()) + first * row_bytes,
                                   2 * row_bytes, values, row_bytes, row_bytes,
                                   static_cast<std::size_t>(rows), cudaMemcpyHostToDevice));
    }
    memory.weights += static_cast<std::int64_t>(both.bytes());
    return both;
  }

  /// An fp32 vector (norm weights) of `count` values.
  DeviceBuffer upload_f32(const WeightSource& source, const std::string& name, std::int64_t count) {
    HostTensor t;
    const void* values = host_values(source, name, count, false, t);
    DeviceBuffer buffer(align_up(static_cast<std::size_t>(count) * 4));
    DICE_CUDA_CHECK(cudaMemcpy(buffer.get(), values, t.size() * 4, cudaMemcpyHostToDevice));
    memory.weights += static_cast<std::int64_t>(buffer.bytes());
    return buffer;
  }

  void upload_weights(const WeightSource& source) {
    const auto& c = config;
    const std::int64_t hd = c.hidden_size, qd = c.num_heads * c.head_dim,
                       kvd = c.num_kv_heads * c.head_dim, in = c.intermediate_size;
    embed = upload(source, {"model.embed_tokens.weight"}, {c.vocab_size * hd});
    if (!c.tie_word_embeddings) lm_head = upload(source, {"lm_head.weight"}, {c.vocab_size * hd});
    final_norm = upload_f32(source, "model.norm.weight", hd);
    for (std::int64_t i = 0; i < c.num_layers; ++i) {
      const std::string p = fmt::format("model.layers.{}.", i);
      Layer l;
      l.qkv = upload(source,
                     {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
                      p + "self_attn.v_proj.weight"},
                     {qd * hd, kvd * hd, kvd * hd});
      l.o = upload(source, {p + "self_attn.o_proj.weight"}, {hd * qd});
      l.gate_up =
          upload_interleaved(source, p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", in, hd);
      l.down = upload(source, {p + "mlp.down_proj.weight"}, {hd * in});
      l.input_norm = upload_f32(source, p + "input_layernorm.weight", hd);
      l.post_norm = upload_f32(source, p + "post_attention_layernorm.weight", hd);
      l.q_norm = upload_f32(source, p + "self_attn.q_norm.weight", c.head_dim);
      l.k_norm = upload_f32(source, p + "self_attn.k_norm.weight", c.head_dim);
      layers.push_back(std::move(l));
    }
    weight_bytes_per_pass = (c.num_layers * layer_matrix_params(c) + c.vocab_size * hd) *
                            static_cast<std::int64_t>(elem);
  }

  /// cos/sin of position * inv_freq_i, computed exactly as the CPU reference (fp32 angle, double
  /// cos/sin rounded to fp32), [max_positions, head_dim / 2] float2.
  void build_rope() {
    const std::int64_t d = config.head_dim, half = d / 2;
    std::vector<float> inv_freq;
    for (std::int64_t i = 0; i < d; i += 2) {
      const float exponent = static_cast<float>(i) / static_cast<float>(d);
      const auto power =
          static_cast<float>(std::pow(config.rope_theta, static_cast<double>(exponent)));
      inv_freq.push_back(1.0f / power);
    }
    std::vector<float2> table(static_cast<std::size_t>(max_positions * half));
    for (std::int64_t p = 0; p < max_positions; ++p) {
      const auto pos = static_cast<float>(p);
      for (std::int64_t i = 0; i < half; ++i) {
        const float angle = pos * inv_freq[static_cast<std::size_t>(i)];
        table[static_cast<std::size_t>(p * half + i)] =
            float2{static_cast<float>(std::cos(static_cast<double>(angle))),
                   static_cast<float>(std::sin(static_cast<double>(angle)))};
      }
    }
    rope = DeviceBuffer(align_up(table.size() * sizeof(float2)));
    DICE_CUDA_CHECK(cudaMemcpy(rope.get(), table.data(), table.size() * sizeof(float2),
                               cudaMemcpyHostToDevice));
    memory.workspace += static_cast<std::int64_t>(rope.bytes());
  }

  DeviceBuffer work_buffer(std::int64_t bytes) {
    DeviceBuffer b(align_up(static_cast<std::size_t>(bytes)));
    memory.workspace += static_cast<std::int64_t>(b.bytes());
    return b;
  }

  /// work_buffer() set to zero: for counters and sums that every pass leaves zero again.
  DeviceBuffer zeroed_work_buffer(std::int64_t bytes) {
    DeviceBuffer b = work_buffer(bytes);
    DICE_CUDA_CHECK(cudaMemset(b.get(), 0, b.bytes()));
    return b;
  }

  void allocate_workspace() {
    const auto& c = config;
    const auto e = static_cast<std::int64_t>(elem);
    rows_cap = bucket_rows(static_cast<std::int32_t>(options.max_rows));
    block_rows_cap = bucket_rows(static_cast<std::int32_t>(options.max_block_rows));
    const std::int64_t r = rows_cap, br = block_rows_cap, qd = c.num_heads * c.head_dim,
                       kvd = c.num_kv_heads * c.head_dim;
    x = work_buffer(r * c.hidden_size * 4);
    h = work_buffer(r * c.hidden_size * e);
    square_sums = work_buffer(r * ((c.hidden_size + kFoldColumns - 1) / kFoldColumns) * 4);
    qkv = work_buffer(r * (qd + 2 * kvd) * 4);
    q = work_buffer(r * qd * e);
    attn = work_buffer(r * qd * e);
    gate_up = work_buffer(r * 2 * c.intermediate_size * 4);
    act = work_buffer(r * c.intermediate_size * e);
    hn = work_buffer(br * c.hidden_size * e);
    logits = work_buffer(br * c.vocab_size * 4);
    proposals = work_buffer(br * static_cast<std::int64_t>(sizeof(ProposalOut)));
    // chunks x padded rows <= 4 x SMs + rows (vocab_pass_chunks), within the chunk limit.
    vocab_partials = work_buffer(std::min<std::int64_t>(4ll * sms + br, br * kMaxVocabChunks) *
                                 static_cast<std::int64_t>(sizeof(VocabPartial)));
    vocab_counters = zeroed_work_buffer(br * 4);
    vocab_bin_counts = zeroed_work_buffer(br * kVocabBins * 4);
    vocab_bin_masses = zeroed_work_buffer(br * kVocabBins * 8);
    partial_out = work_buffer(std::int64_t{kMaxPartials} * kTileQueries * c.head_dim * 4);
    partial_lse = work_buffer(std::int64_t{kMaxPartials} * kTileQueries * 4);
    // One per split tile (at most kMaxPartials / 2); every pass leaves them zero.
    attn_counters = zeroed_work_buffer(std::int64_t{kMaxPartials} * 4);
    proposals_host = PinnedBuffer(static_cast<std::size_t>(br) * sizeof(ProposalOut));
    ensure_meta(1 << 20);
    memory.workspace += static_cast<std::int64_t>(gemm->workspace_bytes() + gemm->scratch_bytes());
  }

  void ensure_meta(std::size_t bytes) {
    if (meta.bytes() >= bytes) return;
    std::size_t capacity = std::max<std::size_t>(meta.bytes(), 1 << 20);
    while (capacity < bytes) capacity *= 2;
    if (meta.bytes() > 0) {
      stream->synchronize();
      graphs.clear();  // they captured the old block's address
      memory.workspace -= static_cast<std::int64_t>(meta.bytes());
    }
    meta = DeviceBuffer(capacity);
    meta_host = PinnedBuffer(capacity);
    memory.workspace += static_cast<std::int64_t>(capacity);
  }

  void allocate_cache() {
    const auto& c = config;
    kv_bytes_per_position = kv_position_bytes(c, static_cast<std::int64_t>(elem));
    const std::int64_t page_bytes = kv_bytes_per_position * kPageTokens;
    const std::int64_t used = memory.weights + memory.workspace;
    const std::int64_t room = memory.budget - used;
    pages = room > 0 ? room / page_bytes : 0;
    if (pages < 2) {
      const std::string left = room >= 0 ? fmt::format("leave {:.3f} GiB of", gib(room))
                                         : fmt::format("need {:.3f} GiB more than", gib(-room));
      throw Error(fmt::format(
          "CUDA backend: not enough GPU memory for a KV cache on {}: weights {:.3f} GiB and work "
          "buffers {:.3f} GiB {} the {:.3f} GiB budget ({:.2f} GiB free at start), which needs "
          "room for at least two KV pages of {:.1f} KiB; raise --gpu-memory (memory_limit_bytes), "
          "lower max_rows / max_block_rows, or free the device",
          memory.device_name, gib(memory.weights), gib(memory.workspace), left, gib(memory.budget),
          gib(memory.free_at_start), static_cast<double>(page_bytes) / 1024.0));
    }
    const std::int64_t half = pages * page_bytes / 2;  // K and V
    k_cache = DeviceBuffer(static_cast<std::size_t>(half));
    v_cache = DeviceBuffer(static_cast<std::size_t>(half));
    memory.kv_cache = 2 * half;
    memory.page_tokens = kPageTokens;
    memory.pages = pages - 1;
    memory.bytes_per_token = kv_bytes_per_position;
    free_pages.clear();
    for (std::int64_t p = pages - 1; p >= 1; --p)  // page 0 is the scratch page
      free_pages.push_back(static_cast<std::int32_t>(p));
  }

  CacheLayer cache_layer(std::int64_t layer) const {
    const std::int64_t stride = pages * config.num_kv_heads * kPageTokens * config.head_dim *
                                static_cast<std::int64_t>(elem);
    return CacheLayer{static_cast<char*>(k_cache.get()) + layer * stride,
                      static_cast<char*>(v_cache.get()) + layer * stride};
  }

  /// Blocks of the persistent attention kernel `kernel` (one the backend set up at start).
  std::int32_t grid_of(AttentionKernel kernel) const {
    return kernel == AttentionKernel::kTensorCoresDeep     ? deep_grid
           : kernel == AttentionKernel::kTensorCoresPaired ? paired_grid
           : kernel == deep_paired_kernel                  ? deep_paired_grid
                                                           : attn_grid;
  }

  /// Which RMSNorms a pass of rows_pad rows folds into the wgmma GEMMs (norm_fold.h), both only
  /// in bf16 with fast_norms, head_dim 128 and a hidden size that 64 divides: the one before qkv
  /// with CudaBackendOptions::fold_qkv_norm where the wgmma kernel takes the down projection
  /// (Gemm::folds_norm); the one before gate/up with fold_mlp_norm and fused_swiglu where it takes
  /// the o and gate/up projections and the hidden size is at most kWgmmaFoldMaxIn (WgmmaNormFold).
  struct NormFolds {
    bool qkv = false, mlp = false;
  };
  NormFolds norm_folds(std::int32_t rows_pad) const {
    const auto& c = config;
    const std::int64_t hd = c.hidden_size, qd = c.num_heads * c.head_dim, in = c.intermediate_size;
    const Layer& l = layers.front();
    const bool fits = options.fast_norms && dtype == CudaDType::kBF16 && c.head_dim == 128 &&
                      hd % kFoldColumns == 0;
    NormFolds folds;
    folds.qkv = fits && options.fold_qkv_norm &&
                gemm->folds_norm(dtype, rows_pad, in, hd, act.get(), l.down.get(), x.get());
    folds.mlp = fits && options.fold_mlp_norm && options.fused_swiglu && hd <= kWgmmaFoldMaxIn &&
                gemm->folds_norm(dtype, rows_pad, qd, hd, attn.get(), l.o.get(), x.get()) &&
                gemm->folds_norm(dtype, rows_pad, hd, 2 * in, h.get(), l.gate_up.get(), act.get());
    return folds;
  }

  /// Whether a pass of rows_pad rows runs the qkv projection with the q/k norm + RoPE epilogue
  /// (CudaBackendOptions::fused_qk_norm_rope): bf16 with fast_norms (the q/k kernel it replaces
  /// is the vectorised one) where Gemm::fuses_qk_rope takes the shape.
  bool qk_rope_epilogue(std::int32_t rows_pad) const {
    return options.fused_qk_norm_rope && options.fast_norms && dtype == CudaDType::kBF16 &&
           gemm->fuses_qk_rope(dtype, rows_pad, config.hidden_size, shape, h.get(),
                               layers.front().qkv.get(), q.get());
  }

  /// Whether a pass of rows_pad rows computes the gate/up projection in bf16 for the SwiGLU
  /// kernel (CudaBackendOptions::bf16_gate_up): bf16, and a GEMM that cuBLASLt runs (the
  /// skinny and the wgmma kernel's rows have the SwiGLU in their epilogue or an fp32 output).
  bool gate_up_in_bf16(std::int32_t rows_pad) const {
    return options.bf16_gate_up && dtype == CudaDType::kBF16 &&
           !gemm->own_kernel(dtype, rows_pad, config.hidden_size, 2 * config.intermediate_size,
                             h.get(), layers.front().gate_up.get(), gate_up.get());
  }

  /// The launch sequence of one pass over rows_pad rows and block_rows_pad block rows, its
  /// attention by `kernel` on grid_of(kernel) blocks. With options.programmatic_launch, or
  /// programmatic_launch_few_rows and rows_pad <= skinny_gemm_rows, our kernels are PDL launches
  /// (launch.cuh); cuBLASLt's are plain, so each waits for the kernel before it to finish, and
  /// the kernel after it waits for it.
  void enqueue(std::int32_t rows_pad, std::int32_t block_rows_pad, bool combine,
               AttentionKernel kernel) {
    const std::int32_t grid = grid_of(kernel);
    const cudaStream_t s = stream->get();
    // Our kernels only; the skinny GEMM's too.
    const bool pdl = options.programmatic_launch || options.early_start_after_cublas ||
                     (options.programmatic_launch_few_rows && rows_pad <= options.skinny_gemm_rows);
    gemm->set_programmatic_launch(pdl, options.pdl_early_reads);
    stats.programmatic_passes += pdl ? 1 : 0;
    const std::int64_t wgmma_before = gemm->wgmma_launches();
    const std::int64_t stream_before = gemm->stream_launches();
    const std::int64_t early_y_before = gemm->early_y_launches();
    const std::int64_t staged_before = gemm->staged_launches();  // only o is staged
    const std::int64_t dynamic_before = gemm->dynamic_launches();
    const auto* header = meta.as<const PassHeader>();
    const auto& c = config;
    const std::int64_t hd = c.hidden_size, qd = c.num_heads * c.head_dim,
                       kvd = c.num_kv_heads * c.head_dim, in = c.intermediate_size;
    launch_embedding(dtype, header, embed.get(), shape.hidden, x.as<float>(), rows_pad, s, pdl);
    // RMSNorm(x) w^T: fused into the skinny GEMM where it takes it, else the norm kernel into h.
    // With `swiglu_act`, SwiGLU is fused into the GEMM's epilogue where the skinny kernel takes
    // it (returns true; y is then not written), else the caller launches it (returns false).
    const bool fuse = options.fused_norm_gemm && options.fast_norms && dtype == CudaDType::kBF16;
    // `trigger`: where the norm lets the next kernel start
    // (CudaBackendOptions::input_norm_trigger, post_norm_trigger).
    const auto norm_into_h = [&](const DeviceBuffer& norm_weight, NormTrigger trigger) {
      launch_rms_norm(dtype, x.as<float>(), norm_weight.as<float>(), shape.hidden, shape.eps,
                      h.get(), rows_pad, nullptr, s, options.fast_norms, pdl,
                      options.pdl_early_reads, trigger);
    };
    const auto normed_gemm = [&](const DeviceBuffer& norm_weight, NormTrigger trigger,
                                 const DeviceBuffer& w, float* y, std::int64_t out,
                                 void* swiglu_act = nullptr) {
      const GemmNorm norm{x.as<float>(), norm_weight.as<float>(), static_cast<float>(shape.eps)};
      const bool norm_fused = fuse && gemm->fuses_norm(dtype, rows_pad, hd, out, norm, w.get(), y);
      if (norm_fused)
        ++stats.fused_norm_gemms;
      else
        norm_into_h(norm_weight, trigger);
      if (swiglu_act != nullptr &&
          gemm->fuses_swiglu(dtype, rows_pad, hd, out, norm_fused ? norm.residual : h.get(),
                             w.get(), swiglu_act)) {
        ++stats.fused_swiglu_gemms;
        gemm->run_swiglu(h.get(), norm_fused ? &norm : nullptr, w.get(), swiglu_act, rows_pad, hd,
                         out, s);
        return true;
      }
      if (norm_fused)
        gemm->run_normed(norm, w.get(), y, rows_pad, hd, out, s);
      else
        gemm->run(dtype, h.get(), w.get(), y, rows_pad, hd, out, false, s);
      return false;
    };
    const bool swiglu = options.fused_swiglu && dtype == CudaDType::kBF16;
    const bool gate_up_bf16 = gate_up_in_bf16(rows_pad);
    // x is final when down starts (Gemm::run's y_ready) where the post norm lets gate/up start
    // only after its own wait (so after o's end): not before it, and not with the norm fused
    // into a streaming gate/up, which lets down start at once, o perhaps still running.
    const bool down_y_ready = options.early_residual_reads &&
                              options.post_norm_trigger != NormTrigger::kBeforeWait && !fuse;
    const NormFolds folds = norm_folds(rows_pad);
    // The q/k norm + RoPE in the qkv projection's epilogue (WgmmaQkRope), with its input norm
    // folded after layer 0 as the q/k kernel would take it.
    const bool qk_epilogue = qk_rope_epilogue(rows_pad);
    const auto qk_rope = [&](const Layer& l, const CacheLayer& cache, bool fold_in) {
      WgmmaQkRope r;
      r.meta = header;
      r.q_norm = l.q_norm.as<float>();
      r.k_norm = l.k_norm.as<float>();
      r.rope = rope.as<float2>();
      r.shape = shape;
      r.q_out = q.get();
      r.cache = cache;
      r.square_sums = fold_in ? square_sums.as<float>() : nullptr;
      r.fold_width = static_cast<std::int32_t>(hd);
      return r;
    };
    // A folded norm's output side: x written by o / down, then bf16(x * next) into h and x's
    // squares into square_sums for the next GEMM's reader (WgmmaNormFold).
    const auto fold_out = [&](const DeviceBuffer& next) {
      WgmmaNormFold f;
      f.norm_weight = next.as<float>();
      f.normed = h.get();
      f.square_sums = square_sums.as<float>();
      return f;
    };
    // Its input side: the gate/up SwiGLU epilogue reads the sums the o projection wrote.
    WgmmaNormFold fold_in_swiglu;
    fold_in_swiglu.in_square_sums = square_sums.as<float>();
    fold_in_swiglu.eps = static_cast<float>(shape.eps);
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const Layer& l = layers[i];
      // Layer 0's input comes from the embedding: its norm is not folded.
      const bool fold_in = folds.qkv && i > 0;
      const CacheLayer cache = cache_layer(static_cast<std::int64_t>(i));
      if (qk_epilogue) {
        if (!fold_in) norm_into_h(l.input_norm, options.input_norm_trigger);
        gemm->run_qk_rope(h.get(), l.qkv.get(), qk_rope(l, cache, fold_in), rows_pad, hd, s);
        ++stats.fused_qk_norm_rope_gemms;
      } else {
        if (fold_in)
          gemm->run(dtype, h.get(), l.qkv.get(), qkv.as<float>(), rows_pad, hd, qd + 2 * kvd, false,
                    s);
        else
          normed_gemm(l.input_norm, options.input_norm_trigger, l.qkv, qkv.as<float>(),
                      qd + 2 * kvd);
        launch_qk_norm_rope(dtype, header, qkv.as<float>(), l.q_norm.as<float>(),
                            l.k_norm.as<float>(), rope.as<float2>(), shape, q.get(), cache,
                            rows_pad, s, options.fast_norms, pdl,
                            fold_in ? square_sums.as<float>() : nullptr,
                            static_cast<std::int32_t>(hd), options.pdl_early_reads);
      }
      launch_attention(dtype, kernel, header, q.get(), cache, shape, attn.get(),
                       partial_out.as<float>(), partial_lse.as<float>(),
                       attn_counters.as<std::uint32_t>(), grid, s, pdl, options.pdl_early_reads);
      if (combine)
        launch_attention_combine(dtype, header, partial_out.as<float>(), partial_lse.as<float>(),
                                 shape, attn.get(), combine_grid, s, pdl);
      if (folds.mlp) {
        gemm->run_folded(attn.get(), l.o.get(), x.as<float>(), nullptr, rows_pad, qd, hd, true,
                         fold_out(l.post_norm), s);
        gemm->run_folded(h.get(), l.gate_up.get(), nullptr, act.get(), rows_pad, hd, 2 * in, false,
                         fold_in_swiglu, s);
        ++stats.folded_norms;
        ++stats.fused_swiglu_gemms;
      } else {
        // x is final when o starts: the attention (or its combine) lets o start only after its
        // own wait, and the kernels before it wait before they let theirs start or finish.
        gemm->run(dtype, attn.get(), l.o.get(), x.as<float>(), rows_pad, qd, hd, true, s,
                  SkinnyStaging{options.stage_o_weights, options.stage_o_batch_rounds},
                  options.early_residual_reads);
        if (gate_up_bf16) {
          norm_into_h(l.post_norm, options.post_norm_trigger);
          gemm->run_bf16_out(h.get(), l.gate_up.get(), gate_up.get(), rows_pad, hd, 2 * in, s);
          launch_swiglu_bf16_input(gate_up.as<__nv_bfloat16>(), shape.intermediate, act.get(),
                                   rows_pad, s, pdl);
        } else if (!normed_gemm(l.post_norm, options.post_norm_trigger, l.gate_up,
                                gate_up.as<float>(), 2 * in, swiglu ? act.get() : nullptr)) {
          launch_swiglu(dtype, gate_up.as<float>(), shape.intermediate, act.get(), rows_pad, s,
                        pdl);
        }
      }
      if (folds.qkv && i + 1 < layers.size()) {
        gemm->run_folded(act.get(), l.down.get(), x.as<float>(), nullptr, rows_pad, in, hd, true,
                         fold_out(layers[i + 1].input_norm), s);
        ++stats.folded_norms;
      } else {
        gemm->run(dtype, act.get(), l.down.get(), x.as<float>(), rows_pad, in, hd, true, s, {},
                  down_y_ready);
      }
    }
    if (block_rows_pad > 0) {
      launch_rms_norm(dtype, x.as<float>(), final_norm.as<float>(), shape.hidden, shape.eps,
                      hn.get(), block_rows_pad, header, s, options.fast_norms, pdl,
                      options.pdl_early_reads);
      gemm->run(dtype, hn.get(), c.tie_word_embeddings ? embed.get() : lm_head.get(),
                logits.as<float>(), block_rows_pad, hd, c.vocab_size, false, s);
      const auto vocab = static_cast<std::int32_t>(c.vocab_size);
      if (options.chunked_vocab_pass)
        launch_vocab_pass_chunked(
            header, logits.as<float>(), vocab, proposals.as<ProposalOut>(), block_rows_pad,
            vocab_pass_chunks(vocab, block_rows_pad, sms),
            VocabWorkspace{vocab_partials.as<VocabPartial>(), vocab_counters.as<std::uint32_t>(),
                           vocab_bin_counts.as<std::uint32_t>(),
                           vocab_bin_masses.as<unsigned long long>()},
            s, pdl);
      else
        launch_vocab_pass(header, logits.as<float>(), vocab, proposals.as<ProposalOut>(),
                          block_rows_pad, s, pdl);
    }
    stats.wgmma_gemms += gemm->wgmma_launches() - wgmma_before;
    stats.stream_gemms += gemm->stream_launches() - stream_before;
    stats.early_residual_gemms += gemm->early_y_launches() - early_y_before;
    stats.staged_o_gemms += gemm->staged_launches() - staged_before;
    stats.dynamic_tail_gemms += gemm->dynamic_launches() - dynamic_before;
  }

  /// The GEMM autotune for a pass of rows_pad rows and block_rows_pad block rows (before its
  /// launch sequence, outside any capture): every GEMM shape of the pass timed on the work
  /// buffers (inputs filled with random values), whose contents are dead until the pass's
  /// embedding (x) and kernels rewrite them.
  /// Stops after about 2 s in all: later shapes keep the heuristic's choice.
  void tune_gemms(std::int32_t rows_pad, std::int32_t block_rows_pad) {
    constexpr double kBudgetSeconds = 2.0;
    const auto& c = config;
    const std::int64_t hd = c.hidden_size, qd = c.num_heads * c.head_dim,
                       kvd = c.num_kv_heads * c.head_dim, in = c.intermediate_size;
    const cudaStream_t s = stream->get();
    const Layer& l = layers.front();
    struct Shape {
      void* x;
      const void* w;
      float* y;
      std::int64_t rows, in, out;
      bool accumulate;
      bool bf16_out = false;
      bool cublas = true;  ///< cuBLASLt may run it (qkv with the q/k epilogue: the wgmma kernel)
    };
    const Shape shapes[] = {{h.get(), l.qkv.get(), qkv.as<float>(), rows_pad, hd, qd + 2 * kvd,
                             false, false, !qk_rope_epilogue(rows_pad)},
                            {attn.get(), l.o.get(), x.as<float>(), rows_pad, qd, hd, true},
                            {h.get(), l.gate_up.get(), gate_up.as<float>(), rows_pad, hd, 2 * in,
                             false, gate_up_in_bf16(rows_pad)},
                            {act.get(), l.down.get(), x.as<float>(), rows_pad, in, hd, true},
                            {hn.get(), c.tie_word_embeddings ? embed.get() : lm_head.get(),
                             logits.as<float>(), block_rows_pad, hd, c.vocab_size, false}};
    for (const Shape& g : shapes) {
      if (gemm_tune_seconds > kBudgetSeconds) return;
      if (!g.cublas) continue;
      gemm_tune_seconds +=
          gemm->tune(dtype, g.x, g.w, g.y, g.rows, g.in, g.out, g.accumulate, s, 16, 3, g.bf16_out);
    }
  }

  /// Runs one planned pass with attention kernel `kernel` (planned for grid_of(kernel) blocks);
  /// writes its block rows' proposals / logits at the given host spans (proposals of the rows
  /// with logits at their PassPlan::block_row_of index; logits only for plans without rows
  /// left out).
  void run_pass(const PassPlan& plan, AttentionKernel kernel, Proposal* proposals_out,
                float* logits_out) {
    ensure_meta(plan.bytes.size());
    std::memcpy(meta_host.get(), plan.bytes.data(), plan.bytes.size());
    const cudaStream_t s = stream->get();
    pass_start->record(s);
    DICE_CUDA_CHECK(
        cudaMemcpyAsync(meta.get(), meta_host.get(), plan.bytes.size(), cudaMemcpyHostToDevice, s));
    const bool graph = options.cuda_graphs && plan.rows <= options.graph_max_rows;
    const std::int32_t rows_pad = graph ? bucket_rows(plan.rows) : plan.rows;
    const std::int32_t block_rows_pad = graph ? bucket_rows(plan.block_rows) : plan.block_rows;
    // Only the kernels without their own merge launch the combine (and key graphs by it).
    const bool combine = plan.attn_combine > 0 && attention_needs_combine(attention);
    if (options.gemm_autotune && dtype == CudaDType::kBF16 && rows_pad <= options.graph_max_rows)
      tune_gemms(rows_pad, block_rows_pad);
    if (graph) {
      const GraphKey key{rows_pad, block_rows_pad, combine, kernel};
      auto it = graphs.find(key);
      if (it == graphs.end()) {
        const auto enqueue_pass = [&] { enqueue(rows_pad, block_rows_pad, combine, kernel); };
        const auto early = [&](cudaGraph_t g) {
          if (options.early_start_after_cublas)
            stats.early_start_edges += start_early_after_foreign_kernels(g, kOwnKernelNames);
        };
        it = graphs.emplace(key, capture_graph(s, enqueue_pass, early)).first;
        ++stats.graph_captures;
      }
      it->second.launch(s);
      ++stats.graph_replays;
    } else {
      enqueue(rows_pad, block_rows_pad, combine, kernel);
    }
    const std::int64_t vocab = config.vocab_size;
    if (plan.block_rows > 0) {
      DICE_CUDA_CHECK(
          cudaMemcpyAsync(proposals_host.get(), proposals.get(),
                          static_cast<std::size_t>(plan.block_rows) * sizeof(ProposalOut),
                          cudaMemcpyDeviceToHost, s));
      if (logits_out != nullptr)
        DICE_CUDA_CHECK(cudaMemcpyAsync(logits_out, logits.get(),
                                        static_cast<std::size_t>(plan.block_rows * vocab) * 4,
                                        cudaMemcpyDeviceToHost, s));
    }
    pass_end->record(s);
    host_lap(stats.host_enqueue_seconds);
    stream->synchronize();
    host_lap(stats.host_wait_seconds);
    stats.device_seconds += static_cast<double>(pass_end->since(*pass_start)) / 1000.0;
    ++stats.passes;
    stats.deep_attention_passes += kernel == AttentionKernel::kTensorCoresDeep ? 1 : 0;
    stats.paired_attention_passes += kernel == AttentionKernel::kTensorCoresPaired ? 1 : 0;
    stats.deep_paired_attention_passes += kernel == deep_paired_kernel ? 1 : 0;
    stats.rows += plan.rows;
    stats.padded_rows += rows_pad;
    stats.block_rows += plan.block_rows;
    stats.kv_positions_read += plan.kv_positions_read;
    stats.attention_scores += plan.attention_scores;
    const PassWork work = pass_work(config, static_cast<std::int64_t>(elem), plan.rows,
                                    plan.block_rows, plan.kv_positions_read, plan.attention_scores);
    stats.bytes += work.gemm_bytes + work.kv_bytes;
    stats.flops += work.gemm_flops + work.attention_flops;
    if (copy_bandwidth > 0 && gemm_rate > 0) {
      const PassFloors floors = pass_floors(work, copy_bandwidth, gemm_rate);
      stats.floor_seconds += floors.floor;
      stats.serial_bound_seconds += floors.serial;
      if (sustained_gemm_rate > 0)
        stats.sustained_floor_seconds +=
            pass_floors(work, copy_bandwidth, sustained_gemm_rate).floor;
    }
    if (proposals_out == nullptr) return;
    const auto* got = proposals_host.as<const ProposalOut>();
    const auto* samples =
        reinterpret_cast<const SampleInfo*>(plan.bytes.data() + plan.header().samples_offset);
    for (std::int32_t r = 0; r < plan.block_rows; ++r) {
      const ProposalOut& p = got[r];
      if (p.status == kProposalNaN)
        throw Error(fmt::format("sampling at position {}: logit of id {} is NaN",
                                samples[r].position, p.token));
      if (p.status != kProposalOk)
        throw Error(fmt::format(
            "sampling at position {}: no allowed id with a finite logit (vocab rows {}, vocab "
            "limit {}, mask id {})",
            samples[r].position, vocab, samples[r].vocab_limit, samples[r].mask_id));
      proposals_out[plan.block_row_of[static_cast<std::size_t>(r)]] =
          Proposal{p.token, p.confidence, p.entropy};
    }
  }

  Sequence& sequence(SequenceId id) {
    const auto it = sequences.find(id);
    if (it == sequences.end())
      throw Error(fmt::format("CUDA backend: sequence {} is not open", id));
    return it->second;
  }

  /// Pages `seq` lacks to hold positions [0, tokens) (0 when it holds enough).
  static std::int64_t pages_missing(const Sequence& seq, std::int64_t tokens) {
    return std::max<std::int64_t>(
        0, ceil_div(std::max<std::int64_t>(tokens, 0), kPageTokens) - std::ssize(seq.pages));
  }

  /// Positions `seq` holds once `item`'s rows (commit and block) are written.
  static std::int64_t end_after(const Sequence& seq, const ForwardItem& item) {
    return seq.length + std::ssize(item.commit) + std::ssize(item.block);
  }

  /// Gives `seq` pages up to `tokens` positions. Throws (changing nothing) when too few are free.
  void grow(SequenceId id, Sequence& seq, std::int64_t tokens) {
    const std::int64_t need = pages_missing(seq, tokens);
    if (need == 0) return;
    if (need > std::ssize(free_pages))
      throw Error(fmt::format(
          "CUDA backend: the KV cache is full: sequence {} needs {} more pages for {} positions, "
          "{} of {} pages ({} tokens each) are free; run fewer sequences at once or raise "
          "--gpu-memory",
          id, need, tokens, free_pages.size(), pages - 1, kPageTokens));
    for (std::int64_t i = 0; i < need; ++i) {
      seq.pages.push_back(free_pages.back());
      free_pages.pop_back();
    }
  }

  /// Checks `items` (open sequences, each once, whole-block commits, blocks of at most B, ids in
  /// the vocabulary, positions within the model's); throws dice::Error / InputError naming the
  /// sequence. Leaves each item's sequence in item_sequences.
  void check(std::span<const ForwardItem> items) {
    ++forward_serial;
    item_sequences.clear();
    for (const auto& item : items) {
      const auto it = sequences.find(item.sequence);
      if (it == sequences.end())
        throw Error(
            fmt::format("CUDA backend: forward of sequence {}, which is not open", item.sequence));
      if (it->second.last_forward == forward_serial)
        throw Error(
            fmt::format("CUDA backend: sequence {} appears twice in one forward", item.sequence));
      it->second.last_forward = forward_serial;
      item_sequences.push_back(&it->second);
      const std::int32_t b = it->second.block_length;
      if (std::ssize(item.commit) % b != 0)
        throw Error(fmt::format(
            "CUDA backend: sequence {}: commit of {} tokens is not a whole number of blocks of {}",
            item.sequence, item.commit.size(), b));
      if (std::ssize(item.block) > b)
        throw Error(fmt::format("CUDA backend: sequence {}: block of {} tokens is longer than {}",
                                item.sequence, item.block.size(), b));
      const std::int64_t start = it->second.length;
      const auto check_ids = [&](std::span<const std::int32_t> ids, std::int64_t first) {
        for (std::size_t i = 0; i < ids.size(); ++i)
          if (ids[i] < 0 || ids[i] >= config.vocab_size)
            throw InputError(fmt::format(
                "sequence {}: token id {} at position {} is outside the vocabulary [0, {})",
                item.sequence, ids[i], first + static_cast<std::int64_t>(i), config.vocab_size));
      };
      check_ids(item.commit, start);
      check_ids(item.block, start + std::ssize(item.commit));
      const std::int64_t end = start + std::ssize(item.commit) + std::ssize(item.block);
      if (end > max_positions)
        throw InputError(
            fmt::format("sequence {}: position {} is beyond the model's {} positions "
                        "(max_position_embeddings)",
                        item.sequence, end - 1, max_positions));
    }
  }

  void forward(std::span<const ForwardItem> items, const ForwardRequest& request,
               ForwardOutput& out) {
    host_mark = std::chrono::steady_clock::now();
    check(items);
    const auto seq_of = [&](std::size_t i) -> Sequence& { return *item_sequences[i]; };
    // Pages for every row this forward writes (block rows included), all or nothing.
    std::int64_t need = 0;
    for (std::size_t i = 0; i < items.size(); ++i)
      need += pages_missing(seq_of(i), end_after(seq_of(i), items[i]));
    if (need > std::ssize(free_pages)) {
      for (std::size_t i = 0; i < items.size(); ++i) {  // throws naming the first that cannot grow
        const std::int64_t end = end_after(seq_of(i), items[i]);
        if (pages_missing(seq_of(i), end) > std::ssize(free_pages))
          grow(items[i].sequence, seq_of(i), end);
      }
      throw Error(fmt::format(
          "CUDA backend: the KV cache is full: this forward needs {} more pages, {} of {} are "
          "free; run fewer sequences at once or raise --gpu-memory",
          need, free_pages.size(), pages - 1));
    }
    for (std::size_t i = 0; i < items.size(); ++i)
      grow(items[i].sequence, seq_of(i), end_after(seq_of(i), items[i]));

    out.row_offsets.assign(1, 0);
    for (const auto& item : items)
      out.row_offsets.push_back(out.row_offsets.back() + item.block.size());
    const std::size_t block_rows = out.row_offsets.back();
    out.vocab_rows = config.vocab_size;
    out.proposals.assign(request.proposals ? block_rows : 0, Proposal{});
    // ForwardRequest::masked_rows_only: the rows left out of the passes' logits are decided
    // positions, which propose their own token (written here; run_pass fills the others).
    const bool masked_only = options.masked_rows_only && request.skips_decided_rows();
    if (masked_only) propose_decided_rows(items, out.proposals);
    out.logits.clear();
    if (request.logits) out.logits.resize(block_rows * static_cast<std::size_t>(config.vocab_size));

    std::vector<ItemSize> sizes;
    sizes.reserve(items.size());
    for (std::size_t i = 0; i < items.size(); ++i)
      sizes.push_back(
          {std::ssize(items[i].commit), std::ssize(items[i].block), seq_of(i).block_length});
    const auto passes = split_forward(sizes, options.max_rows, options.max_block_rows);
    PlanShape base_shape{shape.heads,
                         shape.kv_heads,
                         attn_grid,
                         kMaxPartials,
                         options.attention_min_split_keys,
                         attention_split_align(attention),
                         options.attention_max_splits,
                         options.attention_balanced_plan,
                         options.attention_balanced_plan,
                         paired_grid > 0};
    base_shape.split_cost = options.attention_split_cost;
    base_shape.sms = sms;
    std::size_t out_row = 0;
    std::vector<PassItem> pass_items;
    for (const auto& pieces : passes) {
      pass_items.clear();
      for (const PassPiece& piece : pieces) {
        const ForwardItem& item = items[piece.item];
        const Sequence& seq = seq_of(piece.item);
        PassItem p;
        p.commit =
            item.commit.subspan(static_cast<std::size_t>(piece.commit_begin),
                                static_cast<std::size_t>(piece.commit_end - piece.commit_begin));
        if (piece.with_block) p.block = item.block;
        p.start = seq.length + piece.commit_begin;
        p.block_length = seq.block_length;
        p.pages = seq.pages;
        p.sampling = item.sampling;
        p.step = item.step;
        p.masked_rows_only = masked_only;
        pass_items.push_back(p);
      }
      // The deep kernel, the deep paired kernel or the base plan.
      const AttentionRouting routing =
          route_attention(pass_items, shape.heads, shape.kv_heads, sms, deep_grid, deep_paired_grid,
                          options.attention_deep_pairs_min_keys);
      const bool deep = routing.route == AttentionRoute::kDeep;
      const bool deep_pairs = routing.route == AttentionRoute::kDeepPairs;
      PlanShape plan_shape = base_shape;
      if (deep || deep_pairs) {
        plan_shape.target_work = routing.target_work;
        // The deep kernel never gets pairs (fewer tiles than blocks; it would trap on one); the
        // deep pairs plan for exactly the pairs: every tile that can pair does, none is split.
        plan_shape.pair_tiles = deep_pairs;
      }
      const PassPlan& plan = planner.plan(pass_items, plan_shape);
      // The pipelined kernel's pair code is compiled only into the paired kernels.
      const AttentionKernel kernel = deep                    ? AttentionKernel::kTensorCoresDeep
                                     : deep_pairs            ? deep_paired_kernel
                                     : plan.paired_items > 0 ? AttentionKernel::kTensorCoresPaired
                                                             : attention;
      host_lap(stats.host_prepare_seconds);
      run_pass(plan, kernel, request.proposals ? out.proposals.data() + out_row : nullptr,
               request.logits
                   ? out.logits.data() + out_row * static_cast<std::size_t>(config.vocab_size)
                   : nullptr);
      out_row += static_cast<std::size_t>(plan.pass_block_rows);
      host_lap(stats.host_finish_seconds);
    }
    for (std::size_t i = 0; i < items.size(); ++i) seq_of(i).length += std::ssize(items[i].commit);
    ++stats.forwards;
    host_lap(stats.host_finish_seconds);
  }
};

CudaBackend::CudaBackend(const model::Checkpoint& checkpoint, CudaBackendOptions options)
    : impl_(std::make_unique<Impl>(checkpoint_source(checkpoint), options)) {}

CudaBackend::CudaBackend(const CpuWeights& weights, CudaBackendOptions options)
    : impl_(std::make_unique<Impl>(cpu_source(weights), options)) {}

CudaBackend::~CudaBackend() = default;

const model::ModelConfig& CudaBackend::config() const {
  return impl_->config;
}
const CudaBackendOptions& CudaBackend::options() const {
  return impl_->options;
}
CudaMemoryReport CudaBackend::memory() const {
  return impl_->memory;
}
const CudaForwardStats& CudaBackend::stats() const {
  return impl_->stats;
}
void CudaBackend::reset_stats() {
  impl_->stats = CudaForwardStats{};
}
PassWork pass_work(const model::ModelConfig& c, std::int64_t elem_bytes, std::int64_t rows,
                   std::int64_t block_rows, std::int64_t kv_positions_read,
                   std::int64_t attention_scores) {
  if (elem_bytes != 2 && elem_bytes != 4)
    throw Error(fmt::format("pass work: {} bytes per weight value, expected 2 or 4", elem_bytes));
  if (rows < 0 || block_rows < 0 || block_rows > rows || kv_positions_read < 0 ||
      attention_scores < 0)
    throw Error(
        fmt::format("pass work: counts must be >= 0 with block rows <= rows (rows {}, "
                    "block rows {}, KV positions {}, scores {})",
                    rows, block_rows, kv_positions_read, attention_scores));
  const auto hd = static_cast<double>(c.hidden_size), layers = static_cast<double>(c.num_layers);
  // The matrices every row goes through in every layer, and lm_head for the block rows.
  const auto layer_params = static_cast<double>(layer_matrix_params(c));
  const double lm_head_params = static_cast<double>(c.vocab_size) * hd;
  const auto e = static_cast<double>(elem_bytes);
  PassWork w;
  w.gemm_bytes = (layers * layer_params + (block_rows > 0 ? lm_head_params : 0.0)) * e +
                 static_cast<double>(rows) * hd * e;  // the embedding rows
  w.gemm_flops = 2.0 * static_cast<double>(rows) * layers * layer_params +
                 2.0 * static_cast<double>(block_rows) * lm_head_params;
  w.kv_bytes = static_cast<double>(kv_positions_read) *
               static_cast<double>(kv_position_bytes(c, elem_bytes));
  w.attention_flops = 4.0 * static_cast<double>(attention_scores) *
                      static_cast<double>(c.num_heads * c.head_dim) * layers;
  return w;
}

PassFloors pass_floors(const PassWork& work, double copy_bytes_per_second,
                       double gemm_flops_per_second) {
  if (!(copy_bytes_per_second > 0) || !(gemm_flops_per_second > 0) ||
      !std::isfinite(copy_bytes_per_second) || !std::isfinite(gemm_flops_per_second))
    throw Error(
        fmt::format("pass floors: ceilings must be positive and finite (copy {} B/s, "
                    "GEMM {} FLOP/s)",
                    copy_bytes_per_second, gemm_flops_per_second));
  const auto check = [](double value, const char* name) {
    if (!(value >= 0) || !std::isfinite(value))
      throw Error(fmt::format("pass floors: {} is {}, not a finite count >= 0", name, value));
  };
  check(work.gemm_bytes, "gemm_bytes");
  check(work.gemm_flops, "gemm_flops");
  check(work.kv_bytes, "kv_bytes");
  check(work.attention_flops, "attention_flops");
  const double bw = copy_bytes_per_second, rate = gemm_flops_per_second;
  PassFloors out;
  out.floor = std::max((work.gemm_bytes + work.kv_bytes) / bw,
                       (work.gemm_flops + work.attention_flops) / rate);
  out.serial = std::max(work.gemm_bytes / bw, work.gemm_flops / rate) +
               std::max(work.kv_bytes / bw, work.attention_flops / rate);
  return out;
}

std::int64_t CudaBackend::weight_bytes_per_pass() const {
  return impl_->weight_bytes_per_pass;
}
std::int64_t CudaBackend::kv_bytes_per_position() const {
  return impl_->kv_bytes_per_position;
}
void CudaBackend::set_ceilings(double copy_bytes_per_second, double gemm_flops_per_second,
                               double sustained_gemm_flops_per_second) {
  impl_->copy_bandwidth = copy_bytes_per_second;
  impl_->gemm_rate = gemm_flops_per_second;
  impl_->sustained_gemm_rate = sustained_gemm_flops_per_second;
}
std::vector<CudaGemmChoice> CudaBackend::gemm_choices() const {
  return impl_->gemm->choices();
}
double CudaBackend::gemm_tune_seconds() const {
  return impl_->gemm_tune_seconds;
}
std::int64_t CudaBackend::vocab_rows() const {
  return impl_->config.vocab_size;
}

void CudaBackend::open(SequenceId sequence, std::int32_t block_length) {
  if (block_length < 1 || 2 * static_cast<std::int64_t>(block_length) > impl_->options.max_rows ||
      block_length > impl_->options.max_block_rows)
    throw Error(fmt::format(
        "CUDA backend: sequence {}: block length {} outside [1, {}] (max rows {} per pass)",
        sequence, block_length,
        std::min(impl_->options.max_rows / 2, impl_->options.max_block_rows),
        impl_->options.max_rows));
  if (impl_->sequences.contains(sequence))
    throw Error(fmt::format("CUDA backend: sequence {} is already open", sequence));
  impl_->sequences[sequence] = Impl::Sequence{block_length, 0, {}};
}

void CudaBackend::close(SequenceId sequence) {
  const auto it = impl_->sequences.find(sequence);
  if (it == impl_->sequences.end()) return;
  auto& pages = it->second.pages;
  impl_->free_pages.insert(impl_->free_pages.end(), pages.rbegin(), pages.rend());
  impl_->sequences.erase(it);
}

std::int64_t CudaBackend::cached_tokens(SequenceId sequence) const {
  const auto it = impl_->sequences.find(sequence);
  if (it == impl_->sequences.end())
    throw Error(fmt::format("CUDA backend: sequence {} is not open", sequence));
  return it->second.length;
}

void CudaBackend::forward(std::span<const ForwardItem> items, const ForwardRequest& request,
                          ForwardOutput& out) {
  impl_->forward(items, request, out);
}

bool CudaBackend::can_reserve(std::int64_t tokens) const {
  return ceil_div(std::max<std::int64_t>(tokens, 0), kPageTokens) <= std::ssize(impl_->free_pages);
}

std::optional<std::int64_t> CudaBackend::cache_limit_tokens() const {
  return (impl_->pages - 1) * kPageTokens;
}

void CudaBackend::reserve(SequenceId sequence, std::int64_t tokens) {
  impl_->grow(sequence, impl_->sequence(sequence), tokens);
}

std::optional<std::int64_t> CudaBackend::free_cache_pages() const {
  return std::ssize(impl_->free_pages);
}

std::int64_t CudaBackend::cache_pages_to_hold(SequenceId sequence, std::int64_t tokens) const {
  const auto it = impl_->sequences.find(sequence);
  return Impl::pages_missing(it == impl_->sequences.end() ? Impl::Sequence{} : it->second, tokens);
}

}  // namespace dice::engine
