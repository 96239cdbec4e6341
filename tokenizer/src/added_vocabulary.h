#pragma once
// Added tokens (special and not) and how they are found in text before the BPE runs: Hugging Face
// tokenizers' AddedVocabulary (tokenizer/added_vocabulary.rs): leftmost-longest matches,
// single_word, lstrip and rstrip, matched on raw text (normalized = false) or on NFC text.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dice::tokenizer::detail {

/// One added token, with Hugging Face's flags.
struct AddedToken {
  std::string content;
  std::int32_t id = -1;
  bool single_word = false;  ///< match only when not glued to word characters
  bool lstrip = false;       ///< the match swallows white space on its left
  bool rstrip = false;       ///< the match swallows white space on its right
  bool normalized = true;    ///< matched against NFC text rather than the raw input
  bool special = false;      ///< left out by decode(skip_special)
};

/// True for code points with the Unicode White_Space property (Rust's `\s`).
bool is_white_space(char32_t cp);

/// Finds added tokens in text. `patterns` are the strings to look for (an added token's content,
/// or its NFC form), `tokens` the tokens they stand for.
class AddedTokenMatcher {
 public:
  struct Split {
    std::size_t begin;
    std::size_t end;
    std::int32_t token;  ///< index into the tokens given at construction, or -1 for plain text
  };

  AddedTokenMatcher() = default;
  /// `patterns[i]` is what to look for for `tokens[i]`; tokens with `skip[i]` are never matched
  /// (split_special_tokens).
  AddedTokenMatcher(const std::vector<AddedToken>& tokens, const std::vector<std::string>& patterns,
                    const std::vector<bool>& skip);

  bool empty() const { return nodes_.size() <= 1; }

  /// Splits `text` into plain stretches and added tokens, covering all of it in order
  /// (find_matches of added_vocabulary.rs). Appends to `out`.
  void split(std::string_view text, std::vector<Split>& out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, std::uint32_t>> edges;  // sorted by byte
    std::int32_t token = -1;
  };
  /// Longest pattern starting at `pos`: (length, token index), length 0 if none.
  std::pair<std::size_t, std::int32_t> longest_at(std::string_view text, std::size_t pos) const;
  bool ends_with_word(std::string_view text) const;
  bool starts_with_word(std::string_view text) const;

  std::vector<Node> nodes_{Node{}};
  std::array<bool, 256> first_byte_{};
  std::vector<AddedToken> tokens_;
};

}  // namespace dice::tokenizer::detail
