#pragma once
// Reading a Hugging Face tokenizer folder into a plain description (no matching structures yet).

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "added_vocabulary.h"
#include "pretokenizer.h"

namespace dice::tokenizer::detail {

/// Everything a byte-level BPE tokenizer is made of, as read from the files.
struct TokenizerSpec {
  std::string vocab_source;   ///< file the vocabulary came from (for messages)
  std::string merges_source;  ///< file the merges came from
  std::vector<std::pair<std::string, std::int32_t>> vocab;  ///< byte-level token string -> id
  /// Merges in rank order, as byte-level strings, with the line (or index) they came from.
  struct Merge {
    std::string left;
    std::string right;
    std::size_t line;
  };
  std::vector<Merge> merges;
  std::vector<AddedToken> added;
  std::string pattern{kQwen2Pattern};  ///< pre-tokenizer pattern, Oniguruma syntax
  std::string pattern_source;
  bool nfc = true;
  bool ignore_merges = false;
  bool split_special_tokens = false;  ///< special tokens are not matched in text
};

/// Reads `dir`: tokenizer.json, else vocab.json + merges.txt (+ tokenizer_config.json,
/// added_tokens.json, special_tokens_map.json). Throws dice::InputError naming the folder and file.
TokenizerSpec load_spec(const std::filesystem::path& dir);

}  // namespace dice::tokenizer::detail
