#pragma once
// Random SDAR checkpoints: real model folders (config.json, safetensors, tokenizer files) with
// random weights, for testing the engine at every model size without downloading weights.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dice/model/config.h"
#include "dice/model/dtype.h"

namespace dice::model {

/// How write_random_checkpoint initialises and lays out the weights.
struct RandomCheckpointOptions {
  /// Standard deviation of every matrix (embeddings, projections, lm_head): normal(0, init_std),
  /// as Qwen3's initializer_range. Larger values make the softmax peakier.
  double init_std = 0.02;
  /// RMSNorm weights are 1 + normal(0, norm_noise_std) (0: exactly 1). The noise makes a forward
  /// that ignores a norm weight disagree with one that applies it.
  double norm_noise_std = 0.02;
  /// Largest shard in bytes (Hugging Face's default "5GB" = 5e9). A model whose tensors take more
  /// is split into model-0000i-of-0000n.safetensors plus model.safetensors.index.json; a tensor
  /// larger than the limit gets a shard of its own.
  std::uint64_t max_shard_bytes = 5'000'000'000ull;
  /// Folder whose regular files (tokenizer.json, vocab.json, chat_template.jinja, ...) are copied
  /// into the model folder, except config.json and weights; nullopt: none.
  std::optional<std::filesystem::path> tokenizer_dir;
  /// Generator threads (0: one per core). The values do not depend on it.
  unsigned threads = 0;
  /// Replace an existing non-empty folder's config.json, weights and index (other files stay).
  bool overwrite = false;
};

/// What write_random_checkpoint wrote.
struct RandomCheckpointResult {
  std::vector<std::filesystem::path> weight_files;  ///< the .safetensors files, in shard order
  std::vector<std::filesystem::path> copied_files;  ///< tokenizer files copied in
  std::uint64_t tensor_bytes = 0;                   ///< sum of every tensor's bytes
  std::size_t num_tensors = 0;
};

/// Writes a model folder `dir` for `config` with random weights of `dtype`: config.json (the keys
/// of the shared SDAR configs, torch_dtype set to `dtype`), the expected_tensors() in Qwen3 state
/// dict order, sharded by options.max_shard_bytes (with model.safetensors.index.json as
/// transformers' save_pretrained writes it), and the tokenizer files. Streams: memory use is a
/// few MB per thread whatever the model size. Deterministic: the values depend only on `seed`,
/// the tensor's name and shape and the init options (not on threads, shard size or other
/// tensors). Matrices ~ normal(0, init_std); RMSNorm weights 1 + normal(0, norm_noise_std).
/// Normal deviates: Box-Muller in fp32 (24-bit uniforms) over a SplitMix64 stream per chunk of
/// 2^20 elements; bitwise the same on every run of the same build and C library.
/// Throws dice::InputError naming the folder if it exists and is not empty (unless
/// options.overwrite) or the tokenizer folder is missing, dice::Error naming the file if a write
/// fails.
RandomCheckpointResult write_random_checkpoint(const std::filesystem::path& dir,
                                               const ModelConfig& config, DType dtype,
                                               std::uint64_t seed,
                                               const RandomCheckpointOptions& options = {});

}  // namespace dice::model
