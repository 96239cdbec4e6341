#include "forward_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <tuple>

#include "dice/core/error.h"

namespace dice::engine::cuda {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

std::int32_t align16(std::size_t bytes) {
  return static_cast<std::int32_t>((bytes + 15) / 16 * 16);
}

/// Copies `v` to bytes[offset, ...) and zeroes the padding after it up to the next multiple of
/// 16 (the next section's offset; bytes holds at least that much).
template <typename T>
void put_section(std::vector<std::byte>& bytes, std::int32_t offset, const std::vector<T>& v) {
  const std::size_t size = v.size() * sizeof(T);
  if (size > 0) std::memcpy(bytes.data() + offset, v.data(), size);
  const std::size_t end = static_cast<std::size_t>(offset) + size;
  std::memset(bytes.data() + end, 0, static_cast<std::size_t>(align16(end)) - end);
}

struct Tile {
  std::int32_t row0, rows, kv_end, table;
};

/// PlanShape::wave_splits: the split count of the longest tile (kv_end `longest`) with the
/// smallest estimated makespan over `base` unsplit work items and `target` resident blocks, at
/// most `most`, a split adding `split_cost` positions (the merge); fewer splits on ties.
std::int64_t wave_split_count(std::int64_t base, std::int64_t target, std::int64_t longest,
                              std::int64_t align, std::int64_t most, std::int64_t split_cost) {
  std::int64_t best = 1, best_cost = ceil_div(base, target) * (longest + align);
  for (std::int64_t s = 2; s <= most; ++s) {
    const std::int64_t range = ceil_div(ceil_div(longest, s), align) * align;
    const std::int64_t cost =
        ceil_div(base * ceil_div(longest, range), target) * (range + align) + split_cost;
    if (cost < best_cost) {
      best = s;
      best_cost = cost;
    }
  }
  return best;
}

}  // namespace

std::vector<std::vector<PassPiece>> split_forward(std::span<const ItemSize> items,
                                                  std::int64_t max_rows,
                                                  std::int64_t max_block_rows) {
  std::vector<std::vector<PassPiece>> passes;
  std::vector<PassPiece> current;
  std::int64_t rows = 0, block_rows = 0;
  const auto flush = [&] {
    if (current.empty()) return;
    passes.push_back(std::move(current));
    current.clear();
    rows = block_rows = 0;
  };
  for (std::size_t i = 0; i < items.size(); ++i) {
    const ItemSize& it = items[i];
    const std::int64_t b = it.block_length;
    if (b < 1 || 2 * b > max_rows || b > max_block_rows || it.block > b)
      throw Error(fmt::format(
          "CUDA backend: item {} (block length {}, block {}) does not fit passes of {} rows and "
          "{} block rows",
          i, b, it.block, max_rows, max_block_rows));
    std::int64_t c = 0;
    while (true) {
      const std::int64_t need = (it.commit - c) + it.block;
      if (need <= max_rows - rows && it.block <= max_block_rows - block_rows) {
        current.push_back({i, c, it.commit, true});
        rows += need;
        block_rows += it.block;
        break;
      }
      if (!current.empty()) {
        flush();
        continue;
      }
      // Alone and still too large: a commit-only chunk of as many whole blocks as fit.
      const std::int64_t chunk = std::min(it.commit - c, max_rows / b * b);
      current.push_back({i, c, c + chunk, false});
      flush();
      c += chunk;
    }
  }
  flush();
  return passes;
}

namespace {

/// Rows of one attention tile: kTileQueries over the query heads per KV head. Throws dice::Error
/// unless that group divides kTileQueries.
std::int32_t tile_rows_for(std::int32_t heads, std::int32_t kv_heads) {
  if (kv_heads < 1 || heads % kv_heads != 0 || kTileQueries % (heads / kv_heads) != 0)
    throw Error(fmt::format("CUDA backend: {} heads over {} KV heads: the group must divide {}",
                            heads, kv_heads, kTileQueries));
  return kTileQueries / (heads / kv_heads);
}

}  // namespace

PassPlan plan_pass(std::span<const PassItem> items, const PlanShape& shape) {
  PassPlanner planner;
  return planner.plan(items, shape);
}

struct PassPlanner::Scratch {
  std::vector<RowInfo> rows;
  std::vector<std::int32_t> block_index;
  std::vector<SampleInfo> samples;
  std::vector<std::int32_t> tables;
  std::vector<Tile> tiles, paired;
  std::vector<AttnWork> work, sorted_work;
  std::vector<AttnCombine> combines;
  std::vector<std::int32_t> page_counts;  ///< work items per length in whole pages (the sort)

  /// Empties every buffer, keeping its capacity.
  void clear() {
    rows.clear();
    block_index.clear();
    samples.clear();
    tables.clear();
    tiles.clear();
    paired.clear();
    work.clear();
    sorted_work.clear();
    combines.clear();
    page_counts.clear();
  }
};

PassPlanner::PassPlanner() : scratch_(std::make_unique<Scratch>()) {}
PassPlanner::~PassPlanner() = default;

const PassPlan& PassPlanner::plan(std::span<const PassItem> items, const PlanShape& shape) {
  const std::int32_t tile_rows = tile_rows_for(shape.heads, shape.kv_heads);

  // Every buffer keeps its capacity from the last call: once they have grown, planning
  // allocates nothing (fresh buffers of ~100 KB each forward cost page faults). The plan starts
  // from a default one that takes over the last plan's two buffers.
  plan_ = PassPlan{.bytes = std::move(plan_.bytes), .block_row_of = std::move(plan_.block_row_of)};
  plan_.block_row_of.clear();  // (bytes is resized and every byte written below)
  PassPlan& plan = plan_;
  scratch_->clear();
  auto& [rows, block_index, samples, tables, tiles, paired, work, sorted_work, combines,
         page_counts] = *scratch_;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const PassItem& item = items[i];
    const auto commit = std::ssize(item.commit), n = commit + std::ssize(item.block);
    if (n == 0) continue;
    const std::int64_t b = item.block_length;
    if (b < 1 || item.start % b != 0 || commit % b != 0)
      throw Error(fmt::format(
          "CUDA backend: pass item {}: start {} and commit {} must be multiples of the block "
          "length {}",
          i, item.start, commit, b));
    const std::int64_t end = item.start + n;
    const std::int64_t pages = ceil_div(end, kPageTokens);
    if (std::ssize(item.pages) < pages)
      throw Error(fmt::format(
          "CUDA backend: pass item {}: {} pages cover {} positions, the pass writes up to {}", i,
          item.pages.size(), std::ssize(item.pages) * kPageTokens, end));
    const auto table = static_cast<std::int32_t>(tables.size());
    tables.insert(tables.end(), item.pages.begin(), item.pages.begin() + pages);
    const auto row0 = static_cast<std::int32_t>(rows.size());
    for (std::int64_t r = 0; r < n; ++r) {
      const std::int64_t position = item.start + r;
      const bool is_block = r >= commit;
      RowInfo info{};
      info.token = is_block ? item.block[static_cast<std::size_t>(r - commit)]
                            : item.commit[static_cast<std::size_t>(r)];
      info.position = static_cast<std::int32_t>(position);
      info.kv_len = static_cast<std::int32_t>(is_block ? end : (position / b + 1) * b);
      info.page = item.pages[static_cast<std::size_t>(position / kPageTokens)];
      info.slot = static_cast<std::int32_t>(position % kPageTokens);
      rows.push_back(info);
      plan.attention_scores += info.kv_len;
      if (is_block) ++plan.pass_block_rows;
      if (is_block && !(item.masked_rows_only && info.token != item.sampling.mask_id)) {
        plan.block_row_of.push_back(plan.pass_block_rows - 1);
        block_index.push_back(row0 + static_cast<std::int32_t>(r));
        SampleInfo s{};
        s.temperature = item.sampling.temperature;
        s.top_p = item.sampling.top_p;
        s.seed = item.sampling.seed;
        s.position = position;
        s.step = item.step;
        s.top_k = item.sampling.top_k;
        s.mask_id = item.sampling.mask_id;
        s.vocab_limit = item.sampling.vocab_limit;
        samples.push_back(s);
      }
    }
    plan.kv_positions_read += end;
    for (std::int64_t t0 = 0; t0 < n; t0 += tile_rows) {
      const std::int64_t count = std::min<std::int64_t>(tile_rows, n - t0);
      tiles.push_back({row0 + static_cast<std::int32_t>(t0), static_cast<std::int32_t>(count),
                       rows[static_cast<std::size_t>(row0 + t0 + count - 1)].kv_len, table});
    }
  }

  // Paired tiles (PlanShape::pair_tiles): a full tile and the next tile of the same pass item
  // become one work item, where that still leaves at least target_work items (so none is split).
  if (shape.pair_tiles) {
    for (std::size_t i = 0; i < tiles.size(); ++i) {
      const Tile& a = tiles[i];
      if (i + 1 < tiles.size() && a.rows == tile_rows && tiles[i + 1].table == a.table &&
          tiles[i + 1].row0 == a.row0 + a.rows) {
        const Tile& b = tiles[++i];
        paired.push_back({a.row0, a.rows + b.rows, std::max(a.kv_end, b.kv_end), a.table});
      } else {
        paired.push_back(a);
      }
    }
    if (paired.size() < tiles.size() &&
        std::ssize(paired) * shape.kv_heads >= std::int64_t{shape.target_work})
      std::swap(tiles, paired);
  }

  // Attention work: one item per tile and KV head; KV ranges split (flash-decoding) while the
  // tiles alone leave the GPU's blocks idle.
  const std::int64_t base = std::ssize(tiles) * shape.kv_heads;
  std::int64_t wanted =
      base >= shape.target_work || base == 0 ? 1 : ceil_div(shape.target_work, base);
  const std::int64_t min_split =
      std::max<std::int64_t>(2, ceil_div(shape.min_split_keys, kPageTokens)) * kPageTokens;
  if (shape.split_align < 0 || shape.split_align % kPageTokens != 0 || shape.max_splits < 0)
    throw Error(fmt::format(
        "CUDA backend: attention split alignment {} (a multiple of {}) or max splits {} out of "
        "range",
        shape.split_align, kPageTokens, shape.max_splits));
  const std::int64_t max_splits = shape.max_splits > 0
                                      ? std::min<std::int64_t>(shape.max_splits, kMaxMergedSplits)
                                      : kMaxMergedSplits;
  if (wanted > 1 && shape.split_align > 0 && shape.wave_splits) {
    std::int64_t longest = 0;
    for (const Tile& tile : tiles) longest = std::max<std::int64_t>(longest, tile.kv_end);
    // The merge's cost counts once the unsplit items keep most SMs busy (at least 3/4 of them):
    // below that, splitting is what brings the idle SMs' bandwidth in.
    const std::int64_t sms = shape.sms > 0 ? shape.sms : shape.target_work / 3;
    const std::int64_t split_cost = 4 * base >= 3 * sms ? shape.split_cost : 0;
    wanted =
        wave_split_count(base, shape.target_work, longest, shape.split_align,
                         std::min(max_splits, ceil_div(longest, shape.split_align)), split_cost);
  }
  std::int32_t partial = 0;
  for (const Tile& tile : tiles) {
    std::int64_t splits = 1, split_len = tile.kv_end;
    if (wanted > 1 && shape.split_align > 0) {
      // Ranges of whole split_align units, as many as wanted, once two min_split ranges fit.
      if (tile.kv_end / min_split >= 2) {
        const std::int64_t align = shape.split_align;
        splits = std::min({wanted, ceil_div(tile.kv_end, align), max_splits});
        split_len = ceil_div(ceil_div(tile.kv_end, splits), align) * align;
        splits = ceil_div(tile.kv_end, split_len);
      }
    } else if (wanted > 1) {
      const std::int64_t most =
          shape.min_split_keys > 0 ? tile.kv_end / min_split : ceil_div(tile.kv_end, min_split);
      splits = std::max<std::int64_t>(1, std::min(wanted, most));
      if (splits > 1) {
        split_len = ceil_div(ceil_div(tile.kv_end, splits), kPageTokens) * kPageTokens;
        splits = ceil_div(tile.kv_end, split_len);
      }
    }
    if (splits > 1 && partial + splits * shape.kv_heads > shape.max_partials) {
      splits = 1;  // no room for the partial results
      split_len = tile.kv_end;
    }
    for (std::int32_t h = 0; h < shape.kv_heads; ++h) {
      if (splits == 1) {
        work.push_back({tile.row0, tile.rows, h, 0, tile.kv_end, tile.table, -1, -1});
        continue;
      }
      const auto combine = static_cast<std::int32_t>(combines.size());
      combines.push_back(
          {tile.row0, tile.rows, h, partial, static_cast<std::int32_t>(splits), {0, 0, 0}});
      for (std::int64_t j = 0; j < splits; ++j) {
        const auto begin = static_cast<std::int32_t>(j * split_len);
        const auto end =
            static_cast<std::int32_t>(std::min<std::int64_t>(tile.kv_end, (j + 1) * split_len));
        work.push_back({tile.row0, tile.rows, h, begin, end, tile.table, partial, combine});
        ++partial;
      }
    }
  }
  // Longest first, so that the persistent grid's round-robin ends evenly. With group_tiles by
  // whole pages, then item (its page table's offset, which grows with the item), KV head and
  // range: the tiles reading the same pages become neighbours (ties keep their row order, as in
  // a stable sort). Done as a stable counting sort by whole pages, then an insertion sort by
  // the whole key, which moves only the few items out of order within a length (a split tile
  // beside another tile of its item): the comparison sort took half of the planning time at 128
  // sequences (1-2 thousand items), the planner's share of the host time between passes.
  if (shape.group_tiles) {
    const auto pages_of = [](const AttnWork& w) {
      return ceil_div(std::int64_t{w.kv_end} - w.kv_begin, kPageTokens);
    };
    // Bucket b holds the items of longest_pages - b pages; page_counts[b] ends up as the first
    // slot of bucket b (counts shifted by one, then summed), then its next free slot.
    std::int64_t longest_pages = 0;
    for (const AttnWork& w : work) longest_pages = std::max(longest_pages, pages_of(w));
    const auto bucket = [&](const AttnWork& w) {
      return static_cast<std::size_t>(longest_pages - pages_of(w));
    };
    page_counts.assign(static_cast<std::size_t>(longest_pages) + 2, 0);
    for (const AttnWork& w : work) ++page_counts[bucket(w) + 1];
    for (std::size_t i = 1; i < page_counts.size(); ++i) page_counts[i] += page_counts[i - 1];
    sorted_work.resize(work.size());
    for (const AttnWork& w : work)
      sorted_work[static_cast<std::size_t>(page_counts[bucket(w)]++)] = w;
    const auto key = [&](const AttnWork& w) {
      return std::tuple(-pages_of(w), w.table, w.kv_head, w.kv_begin);
    };
    for (std::size_t i = 1; i < sorted_work.size(); ++i) {
      const AttnWork w = sorted_work[i];
      std::size_t j = i;
      for (; j > 0 && key(w) < key(sorted_work[j - 1]); --j) sorted_work[j] = sorted_work[j - 1];
      sorted_work[j] = w;
    }
    std::swap(work, sorted_work);
  } else {
    std::stable_sort(work.begin(), work.end(), [](const AttnWork& a, const AttnWork& b) {
      return a.kv_end - a.kv_begin > b.kv_end - b.kv_begin;
    });
  }

  PassHeader header{};
  header.rows = static_cast<std::int32_t>(rows.size());
  header.block_rows = static_cast<std::int32_t>(block_index.size());
  header.attn_work = static_cast<std::int32_t>(work.size());
  header.attn_combine = static_cast<std::int32_t>(combines.size());
  std::int32_t offset = align16(sizeof(PassHeader));
  const auto place = [&](std::size_t bytes) {
    const std::int32_t at = offset;
    offset = align16(static_cast<std::size_t>(offset) + bytes);
    return at;
  };
  header.rows_offset = place(rows.size() * sizeof(RowInfo));
  header.block_index_offset = place(block_index.size() * sizeof(std::int32_t));
  header.samples_offset = place(samples.size() * sizeof(SampleInfo));
  header.work_offset = place(work.size() * sizeof(AttnWork));
  header.combine_offset = place(combines.size() * sizeof(AttnCombine));
  header.tables_offset = place(tables.size() * sizeof(std::int32_t));
  // Every byte is written: the header and its padding, then each section and its padding (no
  // zero fill of the whole block first: ~100 KB at 128 sequences, a quarter of the planning).
  plan.bytes.resize(static_cast<std::size_t>(offset));
  std::memset(plan.bytes.data(), 0, static_cast<std::size_t>(align16(sizeof header)));
  std::memcpy(plan.bytes.data(), &header, sizeof header);
  put_section(plan.bytes, header.rows_offset, rows);
  put_section(plan.bytes, header.block_index_offset, block_index);
  put_section(plan.bytes, header.samples_offset, samples);
  put_section(plan.bytes, header.work_offset, work);
  put_section(plan.bytes, header.combine_offset, combines);
  put_section(plan.bytes, header.tables_offset, tables);
  plan.rows = header.rows;
  plan.block_rows = header.block_rows;
  plan.attn_work = header.attn_work;
  plan.attn_combine = header.attn_combine;
  plan.partials = partial;
  plan.paired_items = static_cast<std::int32_t>(std::count_if(
      work.begin(), work.end(), [&](const AttnWork& w) { return w.rows > tile_rows; }));
  return plan;
}

namespace {

/// Work items for `items` with each item's tiles (tile_rows_for rows each) taken `per_item` at
/// a time (1: tiles; 2: paired tiles), times kv_heads.
std::int64_t work_items(std::span<const PassItem> items, std::int32_t heads, std::int32_t kv_heads,
                        std::int64_t per_item) {
  const std::int64_t tile_rows = tile_rows_for(heads, kv_heads);
  std::int64_t work = 0;
  for (const PassItem& item : items)
    work +=
        ceil_div(ceil_div(std::ssize(item.commit) + std::ssize(item.block), tile_rows), per_item);
  return work * kv_heads;
}

}  // namespace

std::int64_t attention_work_items(std::span<const PassItem> items, std::int32_t heads,
                                  std::int32_t kv_heads) {
  return work_items(items, heads, kv_heads, 1);
}

std::int64_t attention_paired_work_items(std::span<const PassItem> items, std::int32_t heads,
                                         std::int32_t kv_heads) {
  return work_items(items, heads, kv_heads, 2);
}

AttentionRouting route_attention(std::span<const PassItem> items, std::int32_t heads,
                                 std::int32_t kv_heads, std::int32_t sms, std::int32_t deep_grid,
                                 std::int32_t deep_paired_grid, std::int64_t deep_pairs_min_keys) {
  const auto fits = [&](std::int64_t work, std::int32_t grid) {
    return grid > 0 && work <= grid && 4 * work >= 3 * std::int64_t{sms};
  };
  const std::int64_t tiles = attention_work_items(items, heads, kv_heads);
  if (fits(tiles, deep_grid)) return {AttentionRoute::kDeep, deep_grid};
  if (deep_paired_grid <= 0) return {};
  const std::int64_t pairs = attention_paired_work_items(items, heads, kv_heads);
  if (pairs >= tiles || !fits(pairs, deep_paired_grid)) return {};
  const bool long_enough =
      deep_pairs_min_keys <= 0 || std::ranges::any_of(items, [&](const PassItem& p) {
        return p.start + std::ssize(p.commit) + std::ssize(p.block) >= deep_pairs_min_keys;
      });
  if (!long_enough) return {};
  return {AttentionRoute::kDeepPairs, static_cast<std::int32_t>(pairs)};
}

std::int32_t bucket_rows(std::int32_t rows) {
  const auto round = [&](std::int32_t m) { return (rows + m - 1) / m * m; };
  if (rows <= 0) return 0;
  if (rows <= 64) return round(8);
  if (rows <= 256) return round(32);
  if (rows <= 1024) return round(64);
  return round(128);
}

}  // namespace dice::engine::cuda
