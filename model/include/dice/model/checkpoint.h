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
#include "dice/model/dtype.h"
#include "dice/model/safetensors.h"

namespace dice::model {

/// Name and shape of every tensor an SDAR model of `config` must have, in the order of
/// Hugging Face's Qwen3 state dict (system.md §2): model.embed_tokens.weight [vocab, hidden];
/// per layer i `model.layers.{i}.` self_attn.q_proj [heads*hd, hidden], k_proj and v_proj
/// [kv_heads*hd, hidden], o_proj [hidden, heads*hd], q_norm and k_norm [hd], mlp.gate_proj and
/// up_proj [inter, hidden], down_proj [hidden, inter], input_layernorm [hidden],
/// post_attention_layernorm [hidden] (all `.weight`); model.norm.weight [hidden];
/// lm_head.weight [vocab, hidden] unless tie_word_embeddings.
std::vector<std::pair<std::string, std::vector<std::int64_t>>> expected_tensors(
    const ModelConfig& config);

/// An opened model folder. Move-only; the tensors stay mapped while it lives. Immutable once
/// open, so any number of threads may read it.
class Checkpoint {
 public:
  /// Opens `dir`: reads config.json, maps model.safetensors (preferred when both exist, as
  /// transformers does) or every shard named by model.safetensors.index.json, validates each file's
  /// header (JSON, dtypes, offsets inside the file, sizes equal to shape x dtype, no overlaps), and
  /// checks that every expected_tensors() entry is present with its shape and a dtype of F32, F16
  /// or BF16 (tensors may differ in dtype; other tensors may have any dtype). With
  /// tie_word_embeddings, lm_head.weight is not required. Throws dice::InputError naming the
  /// folder, the file and the tensor on a missing, truncated, malformed or mismatched input.
  static Checkpoint open(const std::filesystem::path& dir);

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  /// The folder given to open().
  const std::filesystem::path& dir() const;
  /// Its config.json.
  const ModelConfig& config() const;
  /// The tensor called `name`. Throws dice::InputError naming the folder and the tensor if absent.
  const TensorView& tensor(const std::string& name) const;
  /// Whether tensor `name` exists with dtype F32, F16 or BF16.
  bool contains(const std::string& name) const;
  /// Every tensor of dtype F32, F16 or BF16, by name.
  const std::map<std::string, TensorView>& tensors() const;
  /// The mapped .safetensors files, in shard order. Their entries include tensors of dtypes other
  /// than F32/F16/BF16 (absent from tensors()) and, with an index, tensors the index does not name.
  const std::vector<SafetensorsFile>& files() const;

 private:
  struct State;
  explicit Checkpoint(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace dice::model
