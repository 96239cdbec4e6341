#pragma once
// The CPU reference forward of SDAR models (Qwen3 layers with block-causal attention, fp32),
// readable first and multithreaded where it matters (OpenBLAS matrix products, attention heads,
// sampling rows). The slow, obviously-correct twin every faster backend is checked against.

#include <cstdint>
#include <map>
#include <vector>

#include "dice/engine/backend.h"
#include "dice/model/config.h"

namespace dice::model {
class Checkpoint;
}

namespace dice::engine {

/// fp32 weights of one Qwen3 decoder layer, Hugging Face layout: a projection is [out, in]
/// row-major (y = W x).
struct CpuLayerWeights {
  std::vector<float> input_layernorm;           ///< [hidden]
  std::vector<float> q_proj, k_proj, v_proj;    ///< [heads*hd, hidden], [kv*hd, hidden] x2
  std::vector<float> o_proj;                    ///< [hidden, heads*hd]
  std::vector<float> q_norm, k_norm;            ///< [hd] each (per-head RMSNorm)
  std::vector<float> post_attention_layernorm;  ///< [hidden]
  std::vector<float> gate_proj, up_proj;        ///< [inter, hidden] each
  std::vector<float> down_proj;                 ///< [hidden, inter]
};

/// fp32 weights of an SDAR model (system.md §2 names; bf16/fp16 checkpoints are widened).
struct CpuWeights {
  model::ModelConfig config;
  std::vector<float> embed_tokens;  ///< [vocab, hidden]
  std::vector<CpuLayerWeights> layers;
  std::vector<float> norm;     ///< [hidden]
  std::vector<float> lm_head;  ///< [vocab, hidden]; empty when config.tie_word_embeddings

  /// Widens every tensor of `checkpoint` to fp32 (a copy: the checkpoint may close afterwards).
  static CpuWeights from_checkpoint(const model::Checkpoint& checkpoint);
  /// Throws dice::Error naming the tensor whose size does not match `config`.
  void validate() const;
};

/// Options of the CPU backend.
struct CpuBackendOptions {
  int threads = 0;  ///< worker threads (OpenBLAS and ours); 0: every core
};

/// The CPU reference backend. Per layer: RMSNorm; q/k/v projections; per-head q_norm/k_norm
/// RMSNorm before NeoX rotate-half RoPE (angles in fp32 as Hugging Face computes them); GQA
/// attention scaled by 1/sqrt(head_dim) under the block-causal mask; o_proj and residual;
/// RMSNorm; SwiGLU MLP (down(silu(gate) * up)) and residual. Then the final norm and lm_head
/// (or the tied embedding) over the block rows only; logits are not shifted (row i predicts
/// token i). The KV cache holds, per sequence and layer, K (after k_norm and RoPE) and V of the
/// committed tokens. OpenBLAS's thread count is set process-wide by the constructor.
class CpuBackend final : public Backend {
 public:
  /// Throws dice::Error if the weights do not match their config (CpuWeights::validate).
  explicit CpuBackend(CpuWeights weights, CpuBackendOptions options = {});
  CpuBackend(const CpuBackend&) = delete;  ///< gigabytes of weights: never copied by accident
  CpuBackend& operator=(const CpuBackend&) = delete;

  const model::ModelConfig& config() const { return weights_.config; }
  int threads() const { return threads_; }

  std::int64_t vocab_rows() const override { return weights_.config.vocab_size; }
  void open(SequenceId sequence, std::int32_t block_length) override;
  void close(SequenceId sequence) override;
  std::int64_t cached_tokens(SequenceId sequence) const override;
  void forward(std::span<const ForwardItem> items, const ForwardRequest& request,
               ForwardOutput& out) override;

 private:
  struct SequenceCache {
    std::int32_t block_length = 1;
    std::int64_t length = 0;
    std::vector<std::vector<float>> k, v;  ///< per layer [length, kv_heads * head_dim]
  };
  void check(std::span<const ForwardItem> items) const;

  CpuWeights weights_;
  int threads_ = 1;
  std::vector<float> inv_freq_;  ///< RoPE inverse frequencies [head_dim / 2], fp32
  std::map<SequenceId, SequenceCache> caches_;
};

}  // namespace dice::engine
