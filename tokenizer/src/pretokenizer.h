#pragma once
// The regex pre-tokenizer (Hugging Face `Split` with behavior "isolated"), on PCRE2 with JIT.

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "dice/core/error.h"
#include "unicode_classes.h"
#include "utf8.h"

namespace dice::tokenizer::detail {

/// Qwen2's pre-tokenizer pattern (transformers' Qwen2Tokenizer.PRETOKENIZE_REGEX), the pattern of
/// the vocab.json + merges.txt form. PreTokenizer runs it as a hand-written scanner.
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

/// GPT-2's pattern, what a ByteLevel pre-tokenizer with use_regex = true splits with.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// Rewrites a pattern written for Oniguruma (what Hugging Face tokenizers compiles) into PCRE2
/// syntax with the same meaning: `\s` / `\S` become `\p{White_Space}` / `\P{White_Space}`
/// (Oniguruma's Unicode \s is White_Space; PCRE2's also matches U+180E).
std::string onig_to_pcre2(std::string_view pattern);

/// Per-thread match state of a PreTokenizer (PCRE2 match data and JIT stack).
class PreTokenizerScratch {
 public:
  explicit PreTokenizerScratch(const pcre2_code* code);
  pcre2_match_data* match_data() const { return match_data_.get(); }
  pcre2_match_context* context() const { return context_.get(); }

 private:
  struct Free {
    void operator()(pcre2_match_data* p) const { pcre2_match_data_free(p); }
    void operator()(pcre2_match_context* p) const { pcre2_match_context_free(p); }
    void operator()(pcre2_jit_stack* p) const { pcre2_jit_stack_free(p); }
  };
  std::unique_ptr<pcre2_match_data, Free> match_data_;
  std::unique_ptr<pcre2_jit_stack, Free> jit_stack_;
  std::unique_ptr<pcre2_match_context, Free> context_;
};

/// Splits text into pieces: every match of the pattern is a piece, and so is every stretch of
/// text between matches (tokenizers' SplitDelimiterBehavior::Isolated). Immutable; split() may run
/// on many threads, each with its own scratch.
///
/// The Qwen2 pattern runs as a hand-written scanner over Oniguruma's Unicode 16.0 classes (the
/// system's PCRE2 10.42 has Unicode 14.0 tables, and its \s also matches U+180E, so it splits
/// differently from tokenizers on newer letters and numbers); any other pattern runs on PCRE2.
class PreTokenizer {
 public:
  /// Uses the scanner for kQwen2Pattern; compiles any other `pattern` (Oniguruma syntax, as in
  /// tokenizer.json) with PCRE2 (UTF, UCP, JIT). Throws dice::InputError naming `source` if it does
  /// not compile.
  PreTokenizer(std::string_view pattern, std::string_view source);
  PreTokenizer(PreTokenizer&&) noexcept = default;
  PreTokenizer& operator=(PreTokenizer&&) noexcept = default;
  ~PreTokenizer() = default;

  /// The compiled pattern; null when the Qwen2 scanner runs instead.
  const pcre2_code* code() const { return code_.get(); }

  /// Calls `on_piece(std::string_view)` for each piece of `text` (valid UTF-8), in order.
  template <class OnPiece>
  void split(std::string_view text, PreTokenizerScratch& scratch, OnPiece&& on_piece) const {
    if (!code_) {
      split_qwen2(text, on_piece);
      return;
    }
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    const std::size_t n = text.size();
    std::size_t gap = 0;     // start of text not yet emitted
    std::size_t search = 0;  // where the next match may start
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.match_data());
    while (search < n) {
      const int rc = pcre2_match(code_.get(), subject, n, search, PCRE2_NO_UTF_CHECK,
                                 scratch.match_data(), scratch.context());
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) throw_match_error(rc);
      const std::size_t start = ov[0];
      const std::size_t end = ov[1];
      if (end == start) {  // empty match: not a piece; look again one character later
        search = start + utf8_step(text.substr(start)).length;
        continue;
      }
      if (start > gap) on_piece(text.substr(gap, start - gap));
      on_piece(text.substr(start, end - start));
      gap = search = end;
    }
    if (gap < n) on_piece(text.substr(gap));
  }

 private:
  CharClass class_at(std::string_view t, std::size_t i) const {
    std::size_t length = 0;
    return classes_->of(decode_utf8_at(t, i, length));
  }
  // End of the run of code points of class `cls` that starts at `i`.
  std::size_t run_end(std::string_view t, std::size_t i, CharClass cls) const {
    while (i < t.size()) {
      std::size_t length = 0;
      if (classes_->of(decode_utf8_at(t, i, length)) != cls) break;
      i += length;
    }
    return i;
  }
  static std::size_t newlines_end(std::string_view t, std::size_t i) {
    while (i < t.size() && (t[i] == '\r' || t[i] == '\n')) ++i;
    return i;
  }
  // (?i:'s|'t|'re|'ve|'m|'ll|'d) at i (t[i] is the apostrophe): the end, or 0. Besides ASCII case,
  // only U+017F (long s) case-folds to one of these letters.
  static std::size_t contraction_end(std::string_view t, std::size_t i) {
    if (i + 1 >= t.size()) return 0;
    const auto a = static_cast<char>(t[i + 1] | 0x20);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (t.substr(i + 1, 2) == "\xC5\xBF") return i + 3;
    if (i + 2 >= t.size()) return 0;
    const auto b = static_cast<char>(t[i + 2] | 0x20);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
  }

  // The Qwen2 pattern, alternative by alternative, with the regex's backtracking worked out:
  //   (?i:'s|...)                  contractions
  //   [^\r\n\p{L}\p{N}]?\p{L}+     letters, with one leading non-letter/number/newline
  //   \p{N}                        one number
  //   ` ?[^\s\p{L}\p{N}]+[\r\n]*`   punctuation and symbols (one leading space), then newlines
  //   \s*[\r\n]+                   white space up to and including its last newline
  //   \s+(?!\S)                    white space but the last character before a non-space
  //   \s+                          (a single white space before a non-space)
  // End of the Qwen2 pattern's match at i (< t.size()).
  std::size_t qwen2_match_end(std::string_view t, std::size_t i) const {
    const std::size_t n = t.size();
    std::size_t len0 = 0;
    const char32_t c0 = decode_utf8_at(t, i, len0);
    const CharClass k0 = classes_->of(c0);
    if (c0 == '\'') {
      if (const std::size_t end = contraction_end(t, i); end != 0) return end;
    }
    if (k0 == CharClass::kLetter) return run_end(t, i + len0, CharClass::kLetter);
    if (k0 != CharClass::kNumber && c0 != '\r' && c0 != '\n' && i + len0 < n &&
        class_at(t, i + len0) == CharClass::kLetter) {
      return run_end(t, i + len0, CharClass::kLetter);
    }
    if (k0 == CharClass::kNumber) return i + len0;
    if (c0 == ' ' && i + 1 < n && class_at(t, i + 1) == CharClass::kOther)
      return newlines_end(t, run_end(t, i + 1, CharClass::kOther));
    if (k0 == CharClass::kOther) return newlines_end(t, run_end(t, i, CharClass::kOther));
    // White space: the maximal run [i, j), its last character at `last`.
    std::size_t j = i;
    std::size_t last = i;
    std::size_t last_newline = std::string_view::npos;
    while (j < n) {
      std::size_t length = 0;
      const char32_t c = decode_utf8_at(t, j, length);
      if (classes_->of(c) != CharClass::kSpace) break;
      if (c == '\r' || c == '\n') last_newline = j;
      last = j;
      j += length;
    }
    if (last_newline != std::string_view::npos) return last_newline + 1;  // \s*[\r\n]+
    if (j == n || last == i) return j;                                    // \s+(?!\S), \s+
    return last;                                                          // \s+(?!\S)
  }

  template <class OnPiece>
  void split_qwen2(std::string_view t, OnPiece&& on_piece) const {
    std::size_t i = 0;
    while (i < t.size()) {
      const std::size_t end = qwen2_match_end(t, i);
      on_piece(t.substr(i, end - i));
      i = end;
    }
  }

  [[noreturn]] static void throw_match_error(int rc);
  struct Free {
    void operator()(pcre2_code* p) const { pcre2_code_free(p); }
  };
  std::unique_ptr<pcre2_code, Free> code_;
  std::unique_ptr<const CharClasses> classes_;
};

}  // namespace dice::tokenizer::detail
