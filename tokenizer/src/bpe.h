#pragma once
// Byte-level BPE over token ids: rank-ordered merges (Sennrich et al. 2016, "Neural Machine
// Translation of Rare Words with Subword Units"; GPT-2's byte-level variant), applied exactly as
// Hugging Face tokenizers' BPE model does (models/bpe/word.rs: lowest rank first, leftmost among
// equal ranks).

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace dice::tokenizer::detail {

/// GPT-2's byte-to-unicode table: the code point that stands for each byte in byte-level token
/// strings (printable Latin-1 bytes stand for themselves, the others map to U+0100 + n).
std::array<char32_t, 256> byte_to_unicode();

/// Merge rules: (left id, right id) -> (rank, merged id), in an open-addressing hash table.
class MergeTable {
 public:
  struct Merge {
    std::uint32_t rank;
    std::int32_t merged;
  };
  static constexpr std::uint32_t kNoRank = UINT32_MAX;

  /// Adds a rule; a pair given twice keeps the later rank, as tokenizers' HashMap collect does.
  void add(std::int32_t left, std::int32_t right, std::uint32_t rank, std::int32_t merged);
  /// The rule of a pair, or {kNoRank, -1}.
  Merge find(std::int32_t left, std::int32_t right) const {
    if (slots_.empty()) return {kNoRank, -1};
    const std::uint64_t key = pack(left, right);
    std::size_t i = slot_of(key);
    for (;;) {
      const Slot& s = slots_[i];
      if (s.key == key) return s.merge;
      if (s.key == kEmpty) return {kNoRank, -1};
      i = (i + 1) & mask_;
    }
  }
  std::size_t size() const { return size_; }

 private:
  static constexpr std::uint64_t kEmpty = UINT64_MAX;
  struct Slot {
    std::uint64_t key = kEmpty;
    Merge merge{kNoRank, -1};
  };
  static std::uint64_t pack(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  }
  std::size_t slot_of(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift_);
  }
  void grow();

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::size_t size_ = 0;
};

/// Reusable buffers of BpeModel::encode_word.
struct BpeScratch {
  std::vector<std::int32_t> ids;
  std::vector<std::uint32_t> ranks;
  std::vector<std::int32_t> merged;
  std::vector<std::int32_t> prev;
  std::vector<std::int32_t> next;
  std::vector<std::pair<std::uint64_t, std::int32_t>> heap;  // (rank << 32 | position, merged)
};

/// How encode_word finds the next merge: a linear scan (short words), a heap over a linked list
/// (long words), or the one that suits the word's length. Both give the same ids.
enum class MergeStrategy { kAuto, kScan, kHeap };

/// The BPE model: the id of each byte's symbol, and the merges.
class BpeModel {
 public:
  /// `byte_ids[b]`: id of the symbol of byte b, or -1 if the vocabulary lacks it (such bytes are
  /// dropped, as tokenizers does without an unk token).
  BpeModel(std::array<std::int32_t, 256> byte_ids, MergeTable merges);

  /// Appends the ids of one pre-tokenized piece (raw bytes) to `out`.
  void encode_word(std::string_view bytes, std::vector<std::int32_t>& out, BpeScratch& scratch,
                   MergeStrategy strategy = MergeStrategy::kAuto) const;

  const MergeTable& merges() const { return merges_; }

 private:
  void merge_short(BpeScratch& scratch, std::vector<std::int32_t>& out) const;
  void merge_long(BpeScratch& scratch, std::vector<std::int32_t>& out) const;

  std::array<std::int32_t, 256> byte_ids_;
  MergeTable merges_;
};

}  // namespace dice::tokenizer::detail
