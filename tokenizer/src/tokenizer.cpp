// Tokenizer: loading, encoding and decoding (system.md §2; Hugging Face tokenizers' pipeline:
// added tokens, NFC, Split pre-tokenizer, ByteLevel, BPE; ByteLevel decoder).

#include "dice/tokenizer/tokenizer.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "added_vocabulary.h"
#include "bpe.h"
#include "dice/core/error.h"
#include "load.h"
#include "normalizer.h"
#include "pretokenizer.h"
#include "utf8.h"
#include "word_cache.h"

namespace dice::tokenizer {

using namespace detail;

namespace {

// Pieces longer than this are encoded without the cache (long runs of spaces, minified code).
constexpr std::size_t kMaxCachedPiece = 128;
constexpr std::size_t kCacheEntries = std::size_t{1} << 18;
// Token ids index dense tables; real vocabularies stay far below this.
constexpr std::int32_t kMaxTokenId = 1 << 24;

// Per-thread buffers of encode: borrowed from a pool for one call, so a warm encode allocates
// nothing but its result.
struct Workspace {
  explicit Workspace(const pcre2_code* code) : pre(code), cache(kCacheEntries) {}
  PreTokenizerScratch pre;
  NfcScratch nfc_scratch;
  std::string normalized;
  BpeScratch bpe;
  WordCache cache;
  std::vector<AddedTokenMatcher::Split> outer;
  std::vector<AddedTokenMatcher::Split> inner;
};

// The bytes a byte-level token string stands for, if every code point of it is a byte symbol.
std::optional<std::string> symbol_bytes(std::string_view token,
                                        const std::unordered_map<char32_t, char>& map) {
  std::string bytes;
  std::size_t i = 0;
  while (i < token.size()) {
    const Utf8Step step = utf8_step(token.substr(i));
    if (step.kind != Utf8Step::Kind::kChar) return std::nullopt;
    const auto it = map.find(step.code_point);
    if (it == map.end()) return std::nullopt;
    bytes.push_back(it->second);
    i += step.length;
  }
  return bytes;
}

// The ByteLevel decoder of tokenizers on one token: its symbols' bytes, or, when some code point
// is not a byte symbol (an added token like "<|im_end|>" is, one with a space is not), its UTF-8.
std::string byte_level_bytes(std::string_view token,
                             const std::unordered_map<char32_t, char>& map) {
  auto bytes = symbol_bytes(token, map);
  return bytes ? std::move(*bytes) : std::string(token);
}

std::string utf8_of(char32_t cp) {
  std::string s;
  append_utf8(s, cp);
  return s;
}

}  // namespace

struct Tokenizer::State {
  State(BpeModel bpe, PreTokenizer pre_tokenizer)
      : model(std::move(bpe)), pre(std::move(pre_tokenizer)) {}

  BpeModel model;
  PreTokenizer pre;
  std::array<std::int32_t, 256> byte_ids{};
  bool nfc = true;
  bool ignore_merges = false;
  std::unordered_map<std::string, std::int32_t> whole_words;  // raw bytes -> id (ignore_merges)
  AddedTokenMatcher raw_matcher;  // added tokens matched on the input as it is
  AddedTokenMatcher nfc_matcher;  // added tokens matched on NFC text
  std::vector<AddedToken> raw_tokens;
  std::vector<AddedToken> nfc_tokens;
  std::unordered_map<std::string, std::int32_t> token_ids;
  std::string decode_bytes;                   // every token's bytes, back to back
  std::vector<std::uint32_t> decode_offsets;  // id -> [offsets[id], offsets[id + 1])
  enum : std::uint8_t { kNone = 0, kToken = 1, kSpecial = 2 };
  std::vector<std::uint8_t> kinds;  // id -> kNone (no such token), kToken or kSpecial
  std::int32_t vocab_size = 0;

  mutable std::mutex pool_mutex;
  mutable std::vector<std::unique_ptr<Workspace>> pool;

  std::unique_ptr<Workspace> acquire() const {
    {
      const std::lock_guard lock(pool_mutex);
      if (!pool.empty()) {
        auto ws = std::move(pool.back());
        pool.pop_back();
        return ws;
      }
    }
    return std::make_unique<Workspace>(pre.code());
  }
  void release(std::unique_ptr<Workspace> ws) const {
    const std::lock_guard lock(pool_mutex);
    pool.push_back(std::move(ws));
  }

  void encode_piece(std::string_view piece, std::vector<std::int32_t>& ids, Workspace& ws) const {
    if (piece.size() == 1) {
      const std::int32_t id = byte_ids[static_cast<unsigned char>(piece[0])];
      if (id >= 0) ids.push_back(id);
      return;
    }
    const bool cacheable = piece.size() <= kMaxCachedPiece;
    std::uint64_t h = 0;
    if (cacheable) {
      h = hash_bytes(piece);
      bool found = false;
      const auto hit = ws.cache.find(piece, h, found);
      if (found) {
        ids.insert(ids.end(), hit.begin(), hit.end());
        return;
      }
    }
    const std::size_t before = ids.size();
    if (ignore_merges) {
      const auto it = whole_words.find(std::string(piece));
      if (it != whole_words.end()) {
        ids.push_back(it->second);
      } else {
        model.encode_word(piece, ids, ws.bpe);
      }
    } else {
      model.encode_word(piece, ids, ws.bpe);
    }
    if (cacheable) ws.cache.insert(piece, h, std::span(ids.data() + before, ids.size() - before));
  }

  // Walks `text` as encode sees it: `on_added(id)` for each added token, `on_piece(piece)` for
  // each pre-tokenized piece of the NFC text between them.
  template <class OnAdded, class OnPiece>
  void walk(std::string_view text, Workspace& ws, OnAdded&& on_added, OnPiece&& on_piece) const {
    ws.outer.clear();
    if (raw_matcher.empty()) {
      ws.outer.push_back({0, text.size(), -1});
    } else {
      raw_matcher.split(text, ws.outer);
    }
    for (const auto& split : ws.outer) {
      if (split.token >= 0) {
        on_added(raw_tokens[static_cast<std::size_t>(split.token)]);
        continue;
      }
      std::string_view segment = text.substr(split.begin, split.end - split.begin);
      if (segment.empty()) continue;
      if (nfc && !nfc_quick_check(segment)) {
        detail::nfc(segment, ws.normalized, ws.nfc_scratch);
        segment = ws.normalized;
      }
      if (nfc_matcher.empty()) {
        pre.split(segment, ws.pre, on_piece);
        continue;
      }
      ws.inner.clear();
      nfc_matcher.split(segment, ws.inner);
      for (const auto& part : ws.inner) {
        if (part.token >= 0) {
          on_added(nfc_tokens[static_cast<std::size_t>(part.token)]);
        } else if (part.end > part.begin) {
          pre.split(segment.substr(part.begin, part.end - part.begin), ws.pre, on_piece);
        }
      }
    }
  }

  void encode(std::string_view text, std::vector<std::int32_t>& ids, Workspace& ws) const {
    walk(
        text, ws, [&](const AddedToken& t) { ids.push_back(t.id); },
        [&](std::string_view piece) { encode_piece(piece, ids, ws); });
  }

  // Runs `fn(workspace)` with a workspace borrowed from the pool.
  template <class Fn>
  void with_workspace(Fn&& fn) const {
    auto ws = acquire();
    try {
      fn(*ws);
    } catch (...) {
      release(std::move(ws));
      throw;
    }
    release(std::move(ws));
  }

  std::string_view bytes_of(std::int32_t id) const {
    return std::string_view(decode_bytes)
        .substr(decode_offsets[static_cast<std::size_t>(id)],
                decode_offsets[static_cast<std::size_t>(id) + 1] -
                    decode_offsets[static_cast<std::size_t>(id)]);
  }
  void check_id(std::int32_t id) const {
    if (id < 0 || id >= vocab_size || kinds[static_cast<std::size_t>(id)] == kNone)
      throw InputError("decode: token id " + std::to_string(id) +
                       " is not in the vocabulary (size " + std::to_string(vocab_size) + ")");
  }
};

Tokenizer::Tokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::filesystem::path& dir) {
  TokenizerSpec spec = load_spec(dir);

  // Vocabulary and the byte symbols.
  std::unordered_map<std::string, std::int32_t> vocab;
  vocab.reserve(spec.vocab.size() * 2);
  std::int32_t max_id = -1;
  for (const auto& [token, id] : spec.vocab) {
    vocab.emplace(token, id);
    max_id = std::max(max_id, id);
  }
  for (const auto& t : spec.added) max_id = std::max(max_id, t.id);
  if (max_id >= kMaxTokenId)
    throw InputError("tokenizer folder " + dir.string() + ": token id " + std::to_string(max_id) +
                     " is too large (ids must be below " + std::to_string(kMaxTokenId) + ")");
  std::vector<const std::string*> vocab_by_id(static_cast<std::size_t>(max_id + 1), nullptr);
  for (const auto& [token, id] : spec.vocab) {
    auto& slot = vocab_by_id[static_cast<std::size_t>(id)];
    if (slot != nullptr)
      throw InputError("tokenizer file " + spec.vocab_source + ": id " + std::to_string(id) +
                       " is given to both \"" + *slot + "\" and \"" + token + "\"");
    slot = &token;
  }
  const auto byte_chars = byte_to_unicode();
  std::array<std::int32_t, 256> byte_ids{};
  std::unordered_map<char32_t, char> unicode_to_byte;
  for (std::size_t b = 0; b < 256; ++b) {
    unicode_to_byte.emplace(byte_chars[b], static_cast<char>(b));
    const auto it = vocab.find(utf8_of(byte_chars[b]));
    byte_ids[b] = it == vocab.end() ? -1 : it->second;
  }

  // Merges.
  MergeTable merges;
  const bool from_txt = spec.merges_source.ends_with(".txt");
  std::string joined;
  for (std::size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& m = spec.merges[rank];
    const auto where = [&] {
      return "tokenizer file " + spec.merges_source + (from_txt ? ": line " : ": model.merges[") +
             std::to_string(m.line) + (from_txt ? "" : "]");
    };
    const auto left = vocab.find(m.left);
    const auto right = vocab.find(m.right);
    joined.assign(m.left).append(m.right);
    const auto merged = vocab.find(joined);
    for (const auto* missing :
         {left == vocab.end() ? &m.left : nullptr, right == vocab.end() ? &m.right : nullptr}) {
      if (missing != nullptr)
        throw InputError(where() + ": token \"" + *missing + "\" is not in the vocabulary");
    }
    if (merged == vocab.end())
      throw InputError(where() + ": the merged token \"" + joined + "\" is not in the vocabulary");
    merges.add(left->second, right->second, static_cast<std::uint32_t>(rank), merged->second);
  }

  auto state = std::make_unique<State>(BpeModel(byte_ids, std::move(merges)),
                                       PreTokenizer(spec.pattern, spec.pattern_source));
  State& s = *state;
  s.byte_ids = byte_ids;
  s.nfc = spec.nfc;
  s.ignore_merges = spec.ignore_merges;
  if (spec.ignore_merges) {
    for (const auto& [token, id] : spec.vocab) {
      if (auto bytes = symbol_bytes(token, unicode_to_byte)) s.whole_words.emplace(*bytes, id);
    }
  }

  // Added tokens.
  std::vector<std::string> raw_patterns;
  std::vector<std::string> nfc_patterns;
  std::unordered_map<std::int32_t, std::string> added_strings;  // id -> token string for decode
  std::unordered_set<std::string> special_contents;
  NfcScratch scratch;
  for (const auto& t : spec.added) {
    if (t.content.empty()) continue;  // tokenizers ignores empty added tokens
    if (find_invalid_utf8(t.content) != std::string::npos)
      throw InputError("tokenizer folder " + dir.string() + ": added token " +
                       std::to_string(t.id) + " is not valid UTF-8");
    std::string normalized_form = t.content;
    if (t.normalized && spec.nfc) detail::nfc(t.content, normalized_form, scratch);
    added_strings[t.id] = normalized_form;
    if (t.special) special_contents.insert(t.content);
    max_id = std::max(max_id, t.id);
    if (t.normalized) {
      s.nfc_tokens.push_back(t);
      nfc_patterns.push_back(normalized_form);
    } else {
      s.raw_tokens.push_back(t);
      raw_patterns.push_back(t.content);
    }
  }
  const auto skips = [&](const std::vector<AddedToken>& tokens) {
    std::vector<bool> skip;
    for (const auto& t : tokens) skip.push_back(spec.split_special_tokens && t.special);
    return skip;
  };
  s.raw_matcher = AddedTokenMatcher(s.raw_tokens, raw_patterns, skips(s.raw_tokens));
  s.nfc_matcher = AddedTokenMatcher(s.nfc_tokens, nfc_patterns, skips(s.nfc_tokens));

  // Decoding table.
  s.vocab_size = max_id + 1;
  s.kinds.assign(static_cast<std::size_t>(s.vocab_size), State::kNone);
  s.decode_offsets.assign(static_cast<std::size_t>(s.vocab_size) + 1, 0);
  for (std::int32_t id = 0; id < s.vocab_size; ++id) {
    s.decode_offsets[static_cast<std::size_t>(id)] =
        static_cast<std::uint32_t>(s.decode_bytes.size());
    const std::string* token = nullptr;
    if (const auto it = added_strings.find(id); it != added_strings.end()) {
      token = &it->second;
    } else if (static_cast<std::size_t>(id) < vocab_by_id.size()) {
      token = vocab_by_id[static_cast<std::size_t>(id)];
    }
    if (token == nullptr) continue;
    s.kinds[static_cast<std::size_t>(id)] =
        special_contents.contains(*token) ? State::kSpecial : State::kToken;
    s.decode_bytes += byte_level_bytes(*token, unicode_to_byte);
  }
  s.decode_offsets.back() = static_cast<std::uint32_t>(s.decode_bytes.size());

  s.token_ids = std::move(vocab);
  for (const auto& t : spec.added)
    if (!t.content.empty()) s.token_ids[t.content] = t.id;
  return Tokenizer(std::move(state));
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  if (const auto bad = find_invalid_utf8(text); bad != std::string_view::npos)
    throw InputError("encode: the text is not valid UTF-8 (at byte " + std::to_string(bad) + ")");
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  state_->with_workspace([&](Workspace& ws) { state_->encode(text, ids, ws); });
  return ids;
}

std::vector<std::string> Tokenizer::pieces(std::string_view text) const {
  if (const auto bad = find_invalid_utf8(text); bad != std::string_view::npos)
    throw InputError("pieces: the text is not valid UTF-8 (at byte " + std::to_string(bad) + ")");
  std::vector<std::string> out;
  state_->with_workspace([&](Workspace& ws) {
    state_->walk(
        text, ws, [&](const AddedToken& t) { out.push_back(t.content); },
        [&](std::string_view piece) { out.emplace_back(piece); });
  });
  return out;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (const std::int32_t id : ids) {
    state_->check_id(id);
    if (skip_special && state_->kinds[static_cast<std::size_t>(id)] == State::kSpecial) continue;
    bytes.append(state_->bytes_of(id));
  }
  std::string text;
  text.reserve(bytes.size());
  append_lossy_utf8(text, bytes);
  return text;
}

std::int32_t Tokenizer::vocab_size() const {
  return state_->vocab_size;
}

std::optional<std::int32_t> Tokenizer::token_id(std::string_view token) const {
  const auto it = state_->token_ids.find(std::string(token));
  if (it == state_->token_ids.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::is_special(std::int32_t id) const {
  return id >= 0 && id < state_->vocab_size &&
         state_->kinds[static_cast<std::size_t>(id)] == State::kSpecial;
}

std::string_view Tokenizer::token_bytes(std::int32_t id) const {
  state_->check_id(id);
  return state_->bytes_of(id);
}

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(&tokenizer), skip_special_(skip_special) {}

std::string StreamingDecoder::push(std::int32_t id) {
  const std::string_view bytes = tokenizer_->token_bytes(id);
  if (skip_special_ && tokenizer_->is_special(id)) return {};
  pending_.append(bytes);
  const std::size_t settled = settled_prefix_length(pending_);
  std::string text;
  append_lossy_utf8(text, std::string_view(pending_).substr(0, settled));
  pending_.erase(0, settled);
  return text;
}

std::string StreamingDecoder::finish() {
  std::string text;
  append_lossy_utf8(text, pending_);
  pending_.clear();
  return text;
}

}  // namespace dice::tokenizer
