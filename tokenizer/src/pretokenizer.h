#pragma once
// The regex pre-tokenizer (Hugging Face `Split` with behavior "isolated"), on PCRE2 with JIT.

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "dice/core/error.h"
#include "utf8.h"

namespace dice::tokenizer::detail {

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
class PreTokenizer {
 public:
  /// Compiles `pattern` (Oniguruma syntax, as in tokenizer.json) with UTF and UCP. Throws
  /// dice::InputError naming `source` if it does not compile.
  PreTokenizer(std::string_view pattern, std::string_view source);
  PreTokenizer(PreTokenizer&&) noexcept = default;
  PreTokenizer& operator=(PreTokenizer&&) noexcept = default;
  ~PreTokenizer() = default;

  const pcre2_code* code() const { return code_.get(); }

  /// Calls `on_piece(std::string_view)` for each piece of `text` (valid UTF-8), in order.
  template <class OnPiece>
  void split(std::string_view text, PreTokenizerScratch& scratch, OnPiece&& on_piece) const {
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
  [[noreturn]] static void throw_match_error(int rc);
  struct Free {
    void operator()(pcre2_code* p) const { pcre2_code_free(p); }
  };
  std::unique_ptr<pcre2_code, Free> code_;
};

}  // namespace dice::tokenizer::detail
