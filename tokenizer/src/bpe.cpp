#include "bpe.h"

#include <algorithm>
#include <bit>

namespace dice::tokenizer::detail {

namespace {

// Words up to this many symbols merge with a linear scan for the lowest rank (cache-friendly);
// longer ones with a heap and a linked list (O(n log n)).
constexpr std::size_t kShortWord = 48;

}  // namespace

std::array<char32_t, 256> byte_to_unicode() {
  std::array<char32_t, 256> table{};
  std::array<bool, 256> printable{};
  for (int b = '!'; b <= '~'; ++b) printable[static_cast<std::size_t>(b)] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) printable[static_cast<std::size_t>(b)] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) printable[static_cast<std::size_t>(b)] = true;
  char32_t next = 256;
  for (std::size_t b = 0; b < 256; ++b) table[b] = printable[b] ? static_cast<char32_t>(b) : next++;
  return table;
}

void MergeTable::add(std::int32_t left, std::int32_t right, std::uint32_t rank,
                     std::int32_t merged) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const std::uint64_t key = pack(left, right);
  std::size_t i = slot_of(key);
  while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
  if (slots_[i].key == kEmpty) ++size_;
  slots_[i].key = key;
  slots_[i].merge = {rank, merged};
}

void MergeTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  const std::size_t capacity = old.empty() ? 1024 : old.size() * 2;
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    std::size_t i = slot_of(s.key);
    while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

BpeModel::BpeModel(std::array<std::int32_t, 256> byte_ids, MergeTable merges)
    : byte_ids_(byte_ids), merges_(std::move(merges)) {}

void BpeModel::encode_word(std::string_view bytes, std::vector<std::int32_t>& out,
                           BpeScratch& scratch, MergeStrategy strategy) const {
  auto& ids = scratch.ids;
  ids.clear();
  for (const char c : bytes) {
    const std::int32_t id = byte_ids_[static_cast<unsigned char>(c)];
    if (id >= 0) ids.push_back(id);
  }
  if (ids.size() <= 1) {
    out.insert(out.end(), ids.begin(), ids.end());
    return;
  }
  const bool scan = strategy == MergeStrategy::kAuto ? ids.size() <= kShortWord
                                                     : strategy == MergeStrategy::kScan;
  if (scan) {
    merge_short(scratch, out);
  } else {
    merge_long(scratch, out);
  }
}

void BpeModel::merge_short(BpeScratch& scratch, std::vector<std::int32_t>& out) const {
  auto& ids = scratch.ids;
  auto& ranks = scratch.ranks;
  auto& merged = scratch.merged;
  std::size_t n = ids.size();
  ranks.resize(n);
  merged.resize(n);
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const auto m = merges_.find(ids[i], ids[i + 1]);
    ranks[i] = m.rank;
    merged[i] = m.merged;
  }
  ranks[n - 1] = MergeTable::kNoRank;
  for (;;) {
    std::size_t best = 0;
    std::uint32_t best_rank = ranks[0];
    for (std::size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < best_rank) {
        best_rank = ranks[i];
        best = i;
      }
    }
    if (best_rank == MergeTable::kNoRank) break;
    ids[best] = merged[best];
    // Remove symbol best + 1.
    for (std::size_t i = best + 1; i + 1 < n; ++i) {
      ids[i] = ids[i + 1];
      ranks[i] = ranks[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best + 1 < n) {
      const auto m = merges_.find(ids[best], ids[best + 1]);
      ranks[best] = m.rank;
      merged[best] = m.merged;
    } else {
      ranks[best] = MergeTable::kNoRank;
    }
    if (best > 0) {
      const auto m = merges_.find(ids[best - 1], ids[best]);
      ranks[best - 1] = m.rank;
      merged[best - 1] = m.merged;
    }
    if (n == 1) break;
  }
  out.insert(out.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
}

void BpeModel::merge_long(BpeScratch& scratch, std::vector<std::int32_t>& out) const {
  auto& ids = scratch.ids;
  auto& prev = scratch.prev;
  auto& next = scratch.next;
  auto& heap = scratch.heap;
  const std::size_t n = ids.size();
  prev.resize(n);
  next.resize(n);
  heap.clear();
  // Min-heap on (rank, position): std heap functions build max-heaps, so compare with greater.
  const auto cmp = [](const auto& a, const auto& b) { return a.first > b.first; };
  const auto push = [&](std::int32_t pos) {
    const std::int32_t right = next[static_cast<std::size_t>(pos)];
    if (right < 0) return;
    const auto m =
        merges_.find(ids[static_cast<std::size_t>(pos)], ids[static_cast<std::size_t>(right)]);
    if (m.rank == MergeTable::kNoRank) return;
    heap.emplace_back((static_cast<std::uint64_t>(m.rank) << 32) | static_cast<std::uint32_t>(pos),
                      m.merged);
    std::push_heap(heap.begin(), heap.end(), cmp);
  };
  for (std::size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<std::int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<std::int32_t>(i + 1) : -1;
  }
  for (std::size_t i = 0; i + 1 < n; ++i) push(static_cast<std::int32_t>(i));
  constexpr std::int32_t kDead = -2;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    const auto [key, merged_id] = heap.back();
    heap.pop_back();
    const auto pos = static_cast<std::size_t>(key & 0xFFFFFFFFu);
    if (prev[pos] == kDead) continue;  // absorbed by its left neighbour
    const std::int32_t right = next[pos];
    if (right < 0) continue;
    // Stale entry: the pair at pos changed since it was pushed.
    if (merges_.find(ids[pos], ids[static_cast<std::size_t>(right)]).merged != merged_id) continue;
    ids[pos] = merged_id;
    const std::int32_t after = next[static_cast<std::size_t>(right)];
    next[pos] = after;
    if (after >= 0) prev[static_cast<std::size_t>(after)] = static_cast<std::int32_t>(pos);
    prev[static_cast<std::size_t>(right)] = kDead;
    if (prev[pos] >= 0) push(prev[pos]);
    push(static_cast<std::int32_t>(pos));
  }
  for (std::int32_t i = 0; i >= 0; i = next[static_cast<std::size_t>(i)])
    out.push_back(ids[static_cast<std::size_t>(i)]);
}

}  // namespace dice::tokenizer::detail
