#pragma once
// Qwen2/Qwen3 byte-level BPE, exactly as Hugging Face tokenizers encodes and decodes it.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dice::tokenizer {

/// A loaded tokenizer. Immutable after load; encode and decode may be called from many threads.
class Tokenizer {
 public:
  /// Loads from a model folder: tokenizer.json, or vocab.json + merges.txt + tokenizer_config.json
  /// (its added_tokens_decoder; added_tokens.json if present). Throws dice::InputError naming the
  /// folder and the file on a missing or malformed input.
  static Tokenizer load(const std::filesystem::path& dir);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  /// Token ids of `text` (UTF-8): added and special tokens matched first, NFC, the Qwen
  /// pre-tokenizer, byte-to-unicode mapping, rank-ordered merges. No BOS is added. Invalid UTF-8
  /// in `text` throws dice::InputError.
  std::vector<std::int32_t> encode(std::string_view text) const;
  /// What the BPE model sees of `text`, for inspection: each added token as itself, and the
  /// pre-tokenized pieces of the NFC text between them (UTF-8, before the byte-level mapping).
  /// Invalid UTF-8 throws dice::InputError.
  std::vector<std::string> pieces(std::string_view text) const;
  /// The UTF-8 text of `ids`; byte sequences that are not valid UTF-8 become U+FFFD as in Hugging
  /// Face. `skip_special`: leave out special tokens. Ids outside the vocabulary throw
  /// dice::InputError naming the id.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special = false) const;

  /// Number of real tokens: base vocabulary plus added tokens (151670 for SDAR). Ids at or above
  /// it are padding rows of the embedding that must never be emitted.
  std::int32_t vocab_size() const;
  /// The id of a token string (base or added), if any.
  std::optional<std::int32_t> token_id(std::string_view token) const;
  /// True for added tokens marked special (<|im_end|>, <|endoftext|>, <|MASK|>, ...): the ones
  /// decode(skip_special = true) leaves out. False for ids outside the vocabulary.
  bool is_special(std::int32_t id) const;
  /// The raw bytes token `id` stands for (byte-level symbols mapped back to bytes; possibly a
  /// fragment of a UTF-8 character). Throws dice::InputError for an id outside the vocabulary.
  std::string_view token_bytes(std::int32_t id) const;

 private:
  struct State;
  explicit Tokenizer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// Decodes ids one at a time for streaming output: returns the text that became complete UTF-8
/// with this id (possibly empty while a multi-byte character is split across tokens).
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special = false);
  /// Text completed by `id`. Throws dice::InputError for an id outside the vocabulary.
  std::string push(std::int32_t id);
  /// What is left at the end (an incomplete character becomes U+FFFD).
  std::string finish();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace dice::tokenizer
