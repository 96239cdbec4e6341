#include "added_vocabulary.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <memory>

#include "dice/core/error.h"
#include "utf8.h"

namespace dice::tokenizer::detail {

namespace {

// Rust regex's Unicode `\w`, which tokenizers uses for single_word.
constexpr std::string_view kWordChar = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";

struct CodeFree {
  void operator()(pcre2_code* p) const { pcre2_code_free(p); }
};
struct MatchDataFree {
  void operator()(pcre2_match_data* p) const { pcre2_match_data_free(p); }
};

bool is_word_char(std::string_view one_char) {
  // Compiled per call: single_word tokens are rare and this keeps the matcher free of state.
  int error = 0;
  PCRE2_SIZE offset = 0;
  const std::unique_ptr<pcre2_code, CodeFree> code(
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kWordChar.data()), kWordChar.size(),
                    PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr));
  if (!code) throw Error("added tokens: the word-character pattern does not compile");
  const std::unique_ptr<pcre2_match_data, MatchDataFree> data(
      pcre2_match_data_create_from_pattern(code.get(), nullptr));
  return pcre2_match(code.get(), reinterpret_cast<PCRE2_SPTR>(one_char.data()), one_char.size(), 0,
                     PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, data.get(), nullptr) > 0;
}

// Start of the last UTF-8 character of a non-empty valid string.
std::size_t last_char_start(std::string_view text) {
  std::size_t i = text.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  return i;
}

}  // namespace

bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens,
                                     const std::vector<std::string>& patterns,
                                     const std::vector<bool>& skip)
    : tokens_(tokens) {
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    if (skip[t] || patterns[t].empty()) continue;
    std::uint32_t node = 0;
    for (const char c : patterns[t]) {
      const auto byte = static_cast<unsigned char>(c);
      auto& edges = nodes_[node].edges;
      auto it = std::lower_bound(edges.begin(), edges.end(), byte,
                                 [](const auto& e, unsigned char b) { return e.first < b; });
      if (it != edges.end() && it->first == byte) {
        node = it->second;
      } else {
        const auto child = static_cast<std::uint32_t>(nodes_.size());
        edges.insert(it, {byte, child});
        nodes_.emplace_back();
        node = child;
      }
    }
    nodes_[node].token = static_cast<std::int32_t>(t);
    first_byte_[static_cast<unsigned char>(patterns[t][0])] = true;
  }
}

std::pair<std::size_t, std::int32_t> AddedTokenMatcher::longest_at(std::string_view text,
                                                                   std::size_t pos) const {
  std::pair<std::size_t, std::int32_t> best{0, -1};
  std::uint32_t node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const auto& edges = nodes_[node].edges;
    auto it = std::lower_bound(edges.begin(), edges.end(), byte,
                               [](const auto& e, unsigned char b) { return e.first < b; });
    if (it == edges.end() || it->first != byte) break;
    node = it->second;
    if (nodes_[node].token >= 0) best = {i + 1 - pos, nodes_[node].token};
  }
  return best;
}

bool AddedTokenMatcher::ends_with_word(std::string_view text) const {
  return !text.empty() && is_word_char(text.substr(last_char_start(text)));
}

bool AddedTokenMatcher::starts_with_word(std::string_view text) const {
  return !text.empty() && is_word_char(text.substr(0, utf8_step(text).length));
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Split>& out) const {
  std::size_t start_offset = 0;  // end of what has been emitted
  std::size_t pos = 0;           // where the search for the next match starts
  const std::size_t n = text.size();
  while (pos < n) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const auto [length, token] = longest_at(text, pos);
    if (length == 0) {
      ++pos;
      continue;
    }
    std::size_t start = pos;
    std::size_t stop = pos + length;
    pos = stop;  // matches never overlap, even when discarded below
    const AddedToken& t = tokens_[static_cast<std::size_t>(token)];
    if (t.single_word &&
        (ends_with_word(text.substr(0, start)) || starts_with_word(text.substr(stop)))) {
      continue;
    }
    if (t.lstrip) {
      std::size_t s = start;
      while (s > 0) {
        const std::size_t c = last_char_start(text.substr(0, s));
        if (!is_white_space(utf8_step(text.substr(c)).code_point)) break;
        s = c;
      }
      start = std::max(s, start_offset);
    }
    if (t.rstrip) {
      while (stop < n) {
        const Utf8Step step = utf8_step(text.substr(stop));
        if (!is_white_space(step.code_point)) break;
        stop += step.length;
      }
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, token});
    start_offset = stop;
    pos = std::max(pos, stop);
  }
  if (start_offset < n || n == 0) out.push_back({start_offset, n, -1});
}

}  // namespace dice::tokenizer::detail
