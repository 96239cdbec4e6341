#pragma once
// The architecture of an SDAR-family block-diffusion model (Qwen3 layers; system.md §2), read from
// a Hugging Face config.json.

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace dice::model {

/// Shapes and constants of an SDAR model (SDAR-1.7B/4B/8B-Chat, TraDo, DICE-1.7B/4B/8B).
/// Defaults are those every SDAR config shares (system.md §2); the sizes have no default.
struct ModelConfig {
  std::int64_t vocab_size = 151936;  ///< rows of embed_tokens and lm_head (padded vocabulary)
  std::int64_t hidden_size = 0;
  std::int64_t num_layers = 0;  ///< config.json: num_hidden_layers
  std::int64_t num_heads = 0;   ///< config.json: num_attention_heads
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 128;
  std::int64_t intermediate_size = 0;
  double rope_theta = 1e6;  ///< NeoX rotate-half RoPE base
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;  ///< true: lm_head reuses model.embed_tokens.weight
  std::int64_t block_size = 4;       ///< the block of block-causal attention at training time
  std::int32_t mask_token_id = 151669;
  std::int64_t max_position_embeddings = 32768;

  /// Reads the fields above from a config.json object. `source` names the input in errors.
  /// Throws dice::InputError naming `source` and the field when one is missing, has the wrong
  /// type or is out of range (sizes must be positive, hidden_size and num_heads*head_dim
  /// consistent with the projections, num_heads a multiple of num_kv_heads).
  /// Also rejects what the Qwen3 layers of dice do not implement: rope_scaling other than null,
  /// attention_bias true, use_sliding_window true, hidden_act other than silu.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& source);
  /// Reads `path` (a config.json). Throws dice::InputError naming the file.
  static ModelConfig load(const std::filesystem::path& path);
  /// The config.json object this config was read from (round-trips through from_json). It has
  /// the keys of the shared SDAR configs (models/sdar/configs/), "torch_dtype": "bfloat16".
  nlohmann::json to_json() const;
  /// Throws dice::InputError naming `source` if a field is out of range (see from_json).
  void validate(const std::string& source) const;
};

/// The built-in `tiny` preset for tests: hidden 64, 2 layers, 4 heads, 2 kv heads, head_dim 16,
/// intermediate 128, vocab 151936, block 4, untied lm_head; other fields as SDAR's.
ModelConfig tiny_config();

/// `tiny` (tiny_config()), the path of a config.json, or a model folder holding one
/// (ModelConfig::load).
/// Throws dice::InputError naming `name_or_path` if it is neither.
ModelConfig config_preset(const std::string& name_or_path);

}  // namespace dice::model
