#pragma once
// A Hugging Face model folder of an SDAR-family model: config.json plus model.safetensors or
// sharded *.safetensors with model.safetensors.index.json, memory-mapped and validated.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dice/model/config.h"

namespace dice::model {

/// Element types a checkpoint may hold (safetensors names: F32, F16, BF16).
enum class DType { kF32, kF16, kBF16 };

/// Bytes per element of `dtype`.
std::size_t dtype_size(DType dtype);
/// "F32", "F16", "BF16".
const char* dtype_name(DType dtype);

/// One tensor of a checkpoint: a view into the memory-mapped file (valid while its Checkpoint
/// lives). Row-major, `data.size() == product(shape) * dtype_size(dtype)`.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> data;
  std::filesystem::path file;  ///< the .safetensors file it lives in (for error messages)

  std::int64_t numel() const;
  /// The values as fp32 (bf16/fp16 widened exactly), in row-major order.
  std::vector<float> to_f32() const;
};

/// Name and shape of every tensor an SDAR model of `config` must have, in the order of
/// Hugging Face's Qwen3 state dict (system.md §2): model.embed_tokens.weight [vocab, hidden];
/// per layer i `model.layers.{i}.` input_layernorm [hidden], self_attn.q_proj [heads*hd, hidden],
/// k_proj and v_proj [kv_heads*hd, hidden], o_proj [hidden, heads*hd], q_norm and k_norm [hd],
/// post_attention_layernorm [hidden], mlp.gate_proj and up_proj [inter, hidden], down_proj
/// [hidden, inter] (all `.weight`); model.norm.weight [hidden]; lm_head.weight [vocab, hidden]
/// unless tie_word_embeddings.
std::vector<std::pair<std::string, std::vector<std::int64_t>>> expected_tensors(
    const ModelConfig& config);

/// An opened model folder. Move-only; the tensors stay mapped while it lives.
class Checkpoint {
 public:
  /// Opens `dir`: reads config.json, maps model.safetensors or every shard named by
  /// model.safetensors.index.json, validates each file's header (JSON, dtypes, offsets inside the
  /// file, sizes equal to shape x dtype, no overlaps), and checks that every expected_tensors()
  /// entry is present with its shape. Throws dice::InputError naming the folder, the file and
  /// the tensor on a missing, truncated, malformed or mismatched input.
  static Checkpoint open(const std::filesystem::path& dir);

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  const std::filesystem::path& dir() const;
  const ModelConfig& config() const;
  /// The tensor called `name`. Throws dice::InputError naming the folder and the tensor if absent.
  const TensorView& tensor(const std::string& name) const;
  bool contains(const std::string& name) const;
  /// Every tensor, by name.
  const std::map<std::string, TensorView>& tensors() const;

 private:
  struct State;
  explicit Checkpoint(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace dice::model
