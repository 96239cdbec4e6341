#pragma once
// A cache of pre-tokenized pieces -> their BPE ids: open addressing over two arenas, so a lookup
// or an insert allocates nothing once warm. Cleared when full.

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dice::tokenizer::detail {

/// 64-bit hash of a short byte string (multiply-xorshift over 8-byte words).
inline std::uint64_t hash_bytes(std::string_view s) {
  std::uint64_t h = 0x9E3779B97F4A7C15ULL ^ (s.size() * 0xC2B2AE3D27D4EB4FULL);
  const char* p = s.data();
  std::size_t n = s.size();
  while (n >= 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 31;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    std::uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0x94D049BB133111EBULL;
    h ^= h >> 29;
  }
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 32;
  return h | 1;  // 0 marks an empty slot
}

/// Piece bytes -> token ids. Not thread-safe: each thread uses its own.
class WordCache {
 public:
  /// `max_entries`: when reached, the cache starts over empty.
  explicit WordCache(std::size_t max_entries) : max_entries_(max_entries) { reset(1024); }

  /// The ids cached for `key` (hash `h` = hash_bytes(key)), or an empty span with found = false.
  std::span<const std::int32_t> find(std::string_view key, std::uint64_t h, bool& found) const {
    std::size_t i = index_of(h);
    for (;;) {
      const Slot& s = slots_[i];
      if (s.hash == 0) break;
      if (s.hash == h && s.key_length == key.size() &&
          std::memcmp(keys_.data() + s.key_offset, key.data(), key.size()) == 0) {
        found = true;
        return {ids_.data() + s.ids_offset, s.ids_length};
      }
      i = (i + 1) & mask_;
    }
    found = false;
    return {};
  }

  /// Remembers `ids` for `key` (not already cached).
  void insert(std::string_view key, std::uint64_t h, std::span<const std::int32_t> ids) {
    if (size_ + 1 > max_entries_ || keys_.size() + key.size() > kMaxArena ||
        ids_.size() + ids.size() > kMaxArena) {
      reset(slots_.size());
    } else if ((size_ + 1) * 2 > slots_.size()) {
      grow();
    }
    Slot s;
    s.hash = h;
    s.key_offset = static_cast<std::uint32_t>(keys_.size());
    s.key_length = static_cast<std::uint32_t>(key.size());
    s.ids_offset = static_cast<std::uint32_t>(ids_.size());
    s.ids_length = static_cast<std::uint32_t>(ids.size());
    keys_.append(key);
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    place(s);
    ++size_;
  }

  std::size_t size() const { return size_; }

 private:
  static constexpr std::size_t kMaxArena = std::size_t{1} << 28;
  struct Slot {
    std::uint64_t hash = 0;
    std::uint32_t key_offset = 0;
    std::uint32_t key_length = 0;
    std::uint32_t ids_offset = 0;
    std::uint32_t ids_length = 0;
  };

  std::size_t index_of(std::uint64_t h) const { return static_cast<std::size_t>(h >> 8) & mask_; }
  void reset(std::size_t capacity) {
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    keys_.clear();
    ids_.clear();
    size_ = 0;
  }
  void place(const Slot& s) {
    std::size_t i = index_of(s.hash);
    while (slots_[i].hash != 0) i = (i + 1) & mask_;
    slots_[i] = s;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old)
      if (s.hash != 0) place(s);
  }

  std::size_t max_entries_;
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::string keys_;
  std::vector<std::int32_t> ids_;
  std::size_t size_ = 0;
};

}  // namespace dice::tokenizer::detail
