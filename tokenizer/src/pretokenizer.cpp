#include "pretokenizer.h"

#include <array>
#include <string>

namespace dice::tokenizer::detail {

namespace {

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> buffer{};
  pcre2_get_error_message(code, buffer.data(), buffer.size());
  return std::string(reinterpret_cast<const char*>(buffer.data()));
}

}  // namespace

std::string onig_to_pcre2(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c != '\\' || i + 1 == pattern.size()) {
      out.push_back(c);
      continue;
    }
    const char next = pattern[++i];
    if (next == 's') {
      out += "\\p{White_Space}";
    } else if (next == 'S') {
      out += "\\P{White_Space}";
    } else {
      out.push_back('\\');
      out.push_back(next);
    }
  }
  return out;
}

PreTokenizerScratch::PreTokenizerScratch(const pcre2_code* code) {
  if (code == nullptr) return;  // the Qwen2 scanner needs no match state
  match_data_.reset(pcre2_match_data_create_from_pattern(code, nullptr));
  jit_stack_.reset(pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr));
  context_.reset(pcre2_match_context_create(nullptr));
  if (!match_data_ || !jit_stack_ || !context_) throw Error("pre-tokenizer: out of memory");
  pcre2_jit_stack_assign(context_.get(), nullptr, jit_stack_.get());
}

PreTokenizer::PreTokenizer(std::string_view pattern, std::string_view source) {
  if (pattern == kQwen2Pattern) {
    classes_ = std::make_unique<const CharClasses>();
    return;
  }
  const std::string translated = onig_to_pcre2(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr));
  if (!code_) {
    throw InputError(std::string(source) + ": pre-tokenizer pattern does not compile at offset " +
                     std::to_string(offset) + ": " + pcre2_message(error));
  }
  // JIT is an optimization: without it (unsupported platform) pcre2_match interprets.
  pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE);
}

void PreTokenizer::throw_match_error(int rc) {
  throw Error("pre-tokenizer: regular expression match failed: " + pcre2_message(rc));
}

}  // namespace dice::tokenizer::detail
