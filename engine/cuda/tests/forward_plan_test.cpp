// The CUDA backend's host-side planning: passes, row metadata, attention work (no GPU needed).

#include "forward_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <span>
#include <tuple>
#include <vector>

#include "dice/core/error.h"

namespace dice::engine::cuda {
namespace {

std::vector<std::int32_t> ids(std::int64_t n, std::int32_t first = 100) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

/// A sequence denoising `block` (block length 4) after `start` cached positions on `pages`; the
/// item's spans view the caller's vectors.
PassItem denoising_item(std::span<const std::int32_t> block, std::span<const std::int32_t> pages,
                        std::int64_t start) {
  PassItem item;
  item.block = block;
  item.start = start;
  item.block_length = 4;
  item.pages = pages;
  return item;
}

template <typename T>
std::vector<T> section(const PassPlan& plan, std::int32_t offset, std::int32_t count) {
  const auto* p = pass_section<T>(&plan.header(), offset);
  return std::vector<T>(p, p + count);
}

TEST(SplitForward, SmallItemsShareOnePass) {
  const std::vector<ItemSize> items{{4, 4, 4}, {0, 4, 4}, {8, 4, 4}};
  const auto passes = split_forward(items, 64, 16);
  ASSERT_EQ(passes.size(), 1u);
  ASSERT_EQ(passes[0].size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(passes[0][i].item, i);
    EXPECT_EQ(passes[0][i].commit_begin, 0);
    EXPECT_EQ(passes[0][i].commit_end, items[i].commit);
    EXPECT_TRUE(passes[0][i].with_block);
  }
}

TEST(SplitForward, RowAndBlockRowLimitsStartNewPasses) {
  const std::vector<ItemSize> items{{8, 4, 4}, {8, 4, 4}, {0, 4, 4}, {0, 4, 4}};
  const auto by_rows = split_forward(items, 24, 64);  // 12 + 12, then 4 + 4
  ASSERT_EQ(by_rows.size(), 2u);
  EXPECT_EQ(by_rows[0].size(), 2u);
  EXPECT_EQ(by_rows[1].size(), 2u);
  const auto by_block_rows = split_forward(items, 1000, 8);
  ASSERT_EQ(by_block_rows.size(), 2u);
  EXPECT_EQ(by_block_rows[1][0].item, 2u);
}

TEST(SplitForward, LongCommitIsChunkedInWholeBlocksInOrder) {
  const std::vector<ItemSize> items{{0, 4, 4}, {100, 4, 4}, {0, 2, 4}};
  const auto passes = split_forward(items, 30, 64);
  // item 0 alone would leave 26 rows: item 1 (104 rows) flushes it and is cut into chunks of 28.
  std::int64_t next = 0;
  bool block_seen = false;
  std::size_t count = 0;
  for (const auto& pass : passes) {
    std::int64_t rows = 0;
    for (const auto& piece : pass) {
      rows +=
          piece.commit_end - piece.commit_begin + (piece.with_block ? items[piece.item].block : 0);
      if (piece.item != 1) continue;
      ++count;
      EXPECT_FALSE(block_seen);
      EXPECT_EQ(piece.commit_begin, next);
      EXPECT_EQ((piece.commit_end - piece.commit_begin) % 4, 0);
      next = piece.commit_end;
      block_seen = piece.with_block;
    }
    EXPECT_LE(rows, 30);
  }
  EXPECT_EQ(next, 100);
  EXPECT_TRUE(block_seen);
  EXPECT_GE(count, 4u);
  EXPECT_THROW(split_forward(std::vector<ItemSize>{{0, 4, 16}}, 30, 64), Error);
}

TEST(PlanPass, RowsPositionsVisibilityAndSlots) {
  // One sequence with 64 cached positions commits a finished block and denoises the next one
  // (the fused store pass); pages deliberately out of order.
  const auto commit = ids(4), block = ids(4, 200);
  const std::vector<std::int32_t> pages{7, 3, 9};
  PassItem item;
  item.commit = commit;
  item.block = block;
  item.start = 64;
  item.block_length = 4;
  item.pages = pages;
  item.sampling.temperature = 0.5;
  item.sampling.seed = 99;
  item.step = 2;
  const PassPlan plan = plan_pass(std::span(&item, 1), {16, 8, 1, 0});
  ASSERT_EQ(plan.rows, 8);
  ASSERT_EQ(plan.block_rows, 4);
  const auto& h = plan.header();
  for (const std::int32_t offset : {h.rows_offset, h.block_index_offset, h.samples_offset,
                                    h.work_offset, h.combine_offset, h.tables_offset}) {
    EXPECT_EQ(offset % 16, 0);
    EXPECT_LE(static_cast<std::size_t>(offset), plan.bytes.size());
  }
  const auto rows = section<RowInfo>(plan, h.rows_offset, 8);
  for (int r = 0; r < 8; ++r) {
    const int position = 64 + r;
    EXPECT_EQ(rows[r].position, position);
    EXPECT_EQ(rows[r].token, r < 4 ? commit[r] : block[r - 4]);
    // The finished block sees the cache and itself; the block being denoised sees everything.
    EXPECT_EQ(rows[r].kv_len, r < 4 ? 68 : 72);
    EXPECT_EQ(rows[r].page, 9);  // position 64..71 is on the third page
    EXPECT_EQ(rows[r].slot, position % kPageTokens);
  }
  EXPECT_EQ(section<std::int32_t>(plan, h.block_index_offset, 4),
            (std::vector<std::int32_t>{4, 5, 6, 7}));
  const auto samples = section<SampleInfo>(plan, h.samples_offset, 4);
  EXPECT_EQ(samples[1].position, 69);
  EXPECT_EQ(samples[1].step, 2);
  EXPECT_EQ(samples[1].seed, 99u);
  EXPECT_DOUBLE_EQ(samples[1].temperature, 0.5);
  EXPECT_EQ(samples[1].mask_id, 151669);
  EXPECT_EQ(section<std::int32_t>(plan, h.tables_offset, 3), pages);
  EXPECT_EQ(plan.kv_positions_read, 72);
  EXPECT_EQ(plan.attention_scores, 4 * 68 + 4 * 72);
}

TEST(PlanPass, MaskedRowsOnlyLeavesDecidedBlockRowsWithoutLogits) {
  // Two sequences (a fused store pass, then a block with decided positions): with
  // masked_rows_only, only block rows holding the mask id are block rows of the plan; every row
  // still attends and is written to the cache.
  const auto commit = ids(4);
  const std::int32_t mask = 151669;
  const std::vector<std::int32_t> block_a{mask, 7, mask, 9}, block_b{mask, mask, mask, mask};
  const std::vector<std::int32_t> pages_a{3}, pages_b{5};
  std::vector<PassItem> items{denoising_item(block_a, pages_a, 8),
                              denoising_item(block_b, pages_b, 0)};
  items[1].commit = commit;
  for (const bool masked_only : {false, true}) {
    for (auto& item : items) item.masked_rows_only = masked_only;
    const PassPlan plan = plan_pass(items, {16, 8, 1, 0});
    EXPECT_EQ(plan.rows, 12);
    EXPECT_EQ(plan.pass_block_rows, 8);
    const std::vector<std::int32_t> want_of =
        masked_only ? std::vector<std::int32_t>{0, 2, 4, 5, 6, 7}
                    : std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7};
    EXPECT_EQ(plan.block_row_of, want_of);
    ASSERT_EQ(plan.block_rows, std::ssize(want_of));
    // Pass rows: item 0's block is rows 0-3, item 1's commit rows 4-7 and block rows 8-11.
    const std::vector<std::int32_t> want_index =
        masked_only ? std::vector<std::int32_t>{0, 2, 8, 9, 10, 11}
                    : std::vector<std::int32_t>{0, 1, 2, 3, 8, 9, 10, 11};
    EXPECT_EQ(section<std::int32_t>(plan, plan.header().block_index_offset, plan.block_rows),
              want_index);
    const auto samples = section<SampleInfo>(plan, plan.header().samples_offset, plan.block_rows);
    EXPECT_EQ(samples[1].position, masked_only ? 10 : 9);
    EXPECT_EQ(plan.kv_positions_read, 12 + 8);
    EXPECT_EQ(plan.attention_scores, 4 * 12 + 4 * 4 + 4 * 8);
  }
}

TEST(PlanPass, PrefillRowsSeeTheirOwnBlockOnly) {
  const auto commit = ids(12);
  const std::vector<std::int32_t> pages{1};
  PassItem item;
  item.commit = commit;
  item.block_length = 4;
  item.pages = pages;
  const PassPlan plan = plan_pass(std::span(&item, 1), {8, 4, 1, 0});
  EXPECT_EQ(plan.block_rows, 0);
  const auto rows = section<RowInfo>(plan, plan.header().rows_offset, 12);
  for (int r = 0; r < 12; ++r) EXPECT_EQ(rows[r].kv_len, (r / 4 + 1) * 4) << r;
  // Group 2: tiles of 8 rows, 4 KV heads: 2 tiles x 4 heads, no split (target 1).
  ASSERT_EQ(plan.attn_work, 8);
  const auto work = plan.work();
  for (const auto& w : work) {
    EXPECT_EQ(w.partial, -1);
    EXPECT_EQ(w.kv_begin, 0);
    EXPECT_EQ(w.kv_end, w.row0 == 0 ? 8 : 12);  // the last row of the tile decides
    EXPECT_EQ(w.rows, w.row0 == 0 ? 8 : 4);
  }
}

/// Checks that the split tiles' work items tile [0, kv_end) in order and name their combine;
/// kv_end is the tile's last row's kv_len.
void expect_splits_cover_tiles(const PassPlan& plan) {
  const auto combines = plan.combines();
  const auto work = plan.work();
  const auto rows = section<RowInfo>(plan, plan.header().rows_offset, plan.rows);
  for (std::size_t i = 0; i < combines.size(); ++i) {
    const auto& c = combines[i];
    std::vector<AttnWork> parts;
    for (const auto& w : work)
      if (w.partial >= c.partial && w.partial < c.partial + c.splits) parts.push_back(w);
    ASSERT_EQ(std::ssize(parts), c.splits);
    std::sort(parts.begin(), parts.end(),
              [](const AttnWork& a, const AttnWork& b) { return a.partial < b.partial; });
    std::int32_t next = 0;
    for (const auto& p : parts) {
      EXPECT_EQ(p.combine, static_cast<std::int32_t>(i));
      EXPECT_EQ(p.kv_head, c.kv_head);
      EXPECT_EQ(p.row0, c.row0);
      EXPECT_EQ(p.kv_begin, next);  // split order = partial slot order
      next = p.kv_end;
    }
    EXPECT_EQ(next, rows[static_cast<std::size_t>(c.row0 + c.rows - 1)].kv_len);
  }
  for (const auto& w : work) {
    if (w.partial < 0) {
      EXPECT_EQ(w.combine, -1);
    }
  }
}

TEST(PlanPass, FewTilesSplitTheKvRangeIntoPageAlignedParts) {
  const auto block = ids(4), pages = ids(40, 1);
  const PassItem item = denoising_item(block, pages, 1000);
  const PassPlan plan = plan_pass(std::span(&item, 1), {32, 8, 200, 4096});
  // One tile (4 rows x 4 heads) per KV head: 8 tiles; about 200 / 8 = 25 splits wanted, 3 of
  // at least 256 positions of 1004.
  ASSERT_EQ(plan.attn_combine, 8);
  const auto combines = plan.combines();
  const auto work = plan.work();
  EXPECT_EQ(plan.attn_work, plan.partials);
  expect_splits_cover_tiles(plan);  // each tile's splits cover [0, 1004) in order
  for (const auto& c : combines) {
    EXPECT_GT(c.splits, 1);
    EXPECT_EQ(c.rows, 4);
  }
  for (const auto& w : work) {
    EXPECT_EQ(w.kv_begin % kPageTokens, 0);
    EXPECT_GT(w.kv_end, w.kv_begin);
    EXPECT_LE(w.kv_end, 1004);
  }
  // No room for partial results: no split.
  const PassPlan unsplit = plan_pass(std::span(&item, 1), {32, 8, 200, 10});
  EXPECT_EQ(unsplit.attn_combine, 0);
  EXPECT_EQ(unsplit.attn_work, 8);
}

TEST(PlanPass, SplitsHoldAtLeastTheMinimumKeys) {
  const auto block = ids(4), pages = ids(130, 1);
  PassItem item = denoising_item(block, pages, 0);
  const auto splits_of = [&](const PassPlan& plan) {
    std::int32_t most = 1;
    for (const auto& c : plan.combines()) most = std::max(most, c.splits);
    return most;
  };
  // A ~100-position context at one sequence (the profiled decode): no split, no combine ...
  item.start = 96;
  const PassPlan short_plan = plan_pass(std::span(&item, 1), {16, 8, 396, 4096});
  EXPECT_EQ(short_plan.attn_combine, 0);
  EXPECT_EQ(short_plan.attn_work, 8);
  // ... which the first planner's rule split in two ranges.
  const PassPlan first_rule = plan_pass(std::span(&item, 1), {16, 8, 396, 4096, 0});
  EXPECT_EQ(first_rule.attn_combine, 8);
  EXPECT_EQ(splits_of(first_rule), 2);
  // 4,096 positions: split in ranges of at least 256.
  item.start = 4092;
  const PassPlan long_plan = plan_pass(std::span(&item, 1), {16, 8, 396, 4096});
  EXPECT_EQ(long_plan.attn_combine, 8);
  EXPECT_EQ(splits_of(long_plan), 16);
  for (const auto& w : long_plan.work()) EXPECT_GE(w.kv_end - w.kv_begin, 256);
  const PassPlan wide = plan_pass(std::span(&item, 1), {16, 8, 396, 4096, 1024});
  EXPECT_EQ(splits_of(wide), 4);
}

TEST(PlanPass, PipelinedKernelSplitsIntoWholeUnitsAtFewSequences) {
  // SDAR-1.7B heads (16 / 8), one sequence decoding a block of 4 (one tile per KV head), the
  // pipelined kernel's planner: units of 128 positions (one page per warp), up to 16 splits.
  const auto block = ids(4), pages = ids(140, 1);
  PassItem item = denoising_item(block, pages, 0);
  const auto plan_at = [&](std::int64_t start, std::int32_t max_splits,
                           std::int32_t min_split_keys = 256) {
    item.start = start;
    return plan_pass(std::span(&item, 1), {16, 8, 396, 4096, min_split_keys, 128, max_splits});
  };
  const auto lengths = [](const PassPlan& plan) {
    std::vector<std::int32_t> v;
    for (const auto& w : plan.work())
      if (w.kv_head == 0) v.push_back(w.kv_end - w.kv_begin);
    std::sort(v.begin(), v.end());
    return v;
  };
  // ~1,000 positions: 8 ranges of 128 (the last 108), 64 work items.
  const PassPlan p1000 = plan_at(1000, 16);
  EXPECT_EQ(p1000.attn_work, 64);
  EXPECT_EQ(p1000.attn_combine, 8);
  EXPECT_EQ(lengths(p1000), (std::vector<std::int32_t>{108, 128, 128, 128, 128, 128, 128, 128}));
  expect_splits_cover_tiles(p1000);
  for (const auto& w : p1000.work()) EXPECT_EQ(w.kv_begin % 128, 0);
  // At most 4 splits: ranges of 256.
  EXPECT_EQ(lengths(plan_at(1000, 4)), (std::vector<std::int32_t>{236, 256, 256, 256}));
  // 4,160 positions: 16 splits wanted at most, 260 rounded up to 384: 11 ranges.
  const PassPlan p4160 = plan_at(4156, 16);
  EXPECT_EQ(p4160.attn_combine, 8);
  EXPECT_EQ(p4160.attn_work, 88);
  expect_splits_cover_tiles(p4160);
  // 0: the kernel's limit, 64 splits; 33 units of 128.
  EXPECT_EQ(plan_at(4156, 0).attn_work, 8 * 33);
  // Short contexts stay whole: under two 256-position ranges ...
  EXPECT_EQ(plan_at(96, 16).attn_combine, 0);
  EXPECT_EQ(plan_at(500, 16).attn_combine, 0);
  EXPECT_EQ(lengths(plan_at(508, 16)), (std::vector<std::int32_t>{128, 128, 128, 128}));
  // ... or 128-position ones with min_split_keys 64 (a 4-position last range).
  EXPECT_EQ(lengths(plan_at(128, 16, 64)), (std::vector<std::int32_t>{4, 128}));
  // Bad alignment.
  item.start = 1000;
  EXPECT_THROW(plan_pass(std::span(&item, 1), {16, 8, 396, 4096, 256, 100, 16}), Error);
}

TEST(PlanPass, PipelinedKernelSplitsFewerAtSixteenSequences) {
  // 16 sequences at ~1,000 positions: 16 tiles x 8 heads = 128 items for 396 blocks. By waves
  // without a split cost: 3 splits (ranges of 384, the last 236) make 384 items, one wave; the
  // earlier rule took ceil(396 / 128) = 4 splits of 256, 512 items, a second wave of 116. With
  // the split cost (768 positions, counted at 128 >= 396 / 4 items), 1,132 unsplit against
  // 512 + 768 for 3 splits: unsplit. 128 sequences fill the GPU unsplit either way.
  const auto block = ids(4), pages = ids(130, 1);
  const auto plan_for = [&](int sequences, bool waves, std::int32_t split_cost = 0,
                            std::int64_t start = 1000) {
    const std::vector<PassItem> items(static_cast<std::size_t>(sequences),
                                      denoising_item(block, pages, start));
    PlanShape shape{16, 8, 396, 4096, 256, 128, 16};
    shape.wave_splits = waves;
    shape.split_cost = split_cost;
    return plan_pass(items, shape);
  };
  EXPECT_EQ(plan_for(16, true, 768).attn_combine, 0);
  EXPECT_EQ(plan_for(16, true, 768).attn_work, 128);
  // At ~4,000 positions splitting still pays: 3 splits of 1,408 (1 wave) + 768 < 4,132.
  EXPECT_EQ(plan_for(16, true, 768, 4000).attn_work, 384);
  // 8 sequences (64 items, under a quarter of the blocks): the cost is not counted.
  EXPECT_EQ(plan_for(8, true, 768).attn_work, plan_for(8, true, 0).attn_work);
  EXPECT_GT(plan_for(8, true, 768).attn_combine, 0);
  const PassPlan sixteen = plan_for(16, true);
  EXPECT_EQ(sixteen.attn_combine, 128);
  EXPECT_EQ(sixteen.attn_work, 384);
  expect_splits_cover_tiles(sixteen);
  for (const auto& w : sixteen.work()) EXPECT_LE(w.kv_end - w.kv_begin, 384);
  const PassPlan earlier = plan_for(16, false);
  EXPECT_EQ(earlier.attn_combine, 128);
  EXPECT_EQ(earlier.attn_work, 512);
  expect_splits_cover_tiles(earlier);
  for (const auto& w : earlier.work()) EXPECT_LE(w.kv_end - w.kv_begin, 256);
  for (const bool waves : {true, false}) {
    const PassPlan many = plan_for(128, waves);
    EXPECT_EQ(many.attn_combine, 0);
    EXPECT_EQ(many.attn_work, 128 * 8);
  }
  // One sequence keeps the most splits that still fit one wave: 8 ranges of 128 at ~1,000.
  const PassPlan one = plan_for(1, true);
  EXPECT_EQ(one.attn_work, 64);
  EXPECT_EQ(one.attn_combine, 8);
}

TEST(PlanPass, TilesReadingTheSamePagesAreNeighbours) {
  // SDAR-4B heads (32 / 8: 4 query heads per KV head, tiles of 4 rows): a fused store pass of
  // 4 commit rows and a block of 4 makes two tiles per sequence, whose kv_end differ by 4
  // (1,020 and 1,024). With group_tiles each sequence's two tiles of a KV head are adjacent in
  // launch order, longest (by whole pages) first; without, all block-row tiles come first.
  const auto commit = ids(4), block = ids(4, 100), pages = ids(32, 1);
  constexpr int kSequences = 128;
  std::vector<PassItem> items(kSequences, denoising_item(block, pages, 1016));
  for (auto& item : items) item.commit = commit;
  for (const bool grouped : {true, false}) {
    PlanShape shape{32, 8, 396, 4096, 256, 128, 16};
    shape.group_tiles = grouped;
    const PassPlan plan = plan_pass(items, shape);
    const auto work = plan.work();
    ASSERT_EQ(std::ssize(work), kSequences * 8 * 2);
    std::int64_t adjacent = 0;
    for (std::size_t i = 0; i + 1 < work.size(); i += 2)
      adjacent += work[i].kv_head == work[i + 1].kv_head &&
                  work[i].row0 / 8 == work[i + 1].row0 / 8 && work[i].row0 + 4 == work[i + 1].row0;
    EXPECT_EQ(adjacent, grouped ? kSequences * 8 : 0) << (grouped ? "grouped" : "by length");
    for (std::size_t i = 1; i < work.size(); ++i)
      EXPECT_GE((work[i - 1].kv_end - work[i - 1].kv_begin + kPageTokens - 1) / kPageTokens,
                (work[i].kv_end - work[i].kv_begin + kPageTokens - 1) / kPageTokens);
  }
  // Longer sequences still go first: one at 2,048 positions among those at 1,024.
  const auto long_pages = ids(70, 1000);
  items[5] = denoising_item(block, long_pages, 2044);
  items[5].commit = commit;
  const PassPlan plan = plan_pass(items, {32, 8, 396, 4096, 256, 128, 16});
  const auto work = plan.work();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(work[static_cast<std::size_t>(i)].row0 / 8, 5);
}

TEST(PlanPass, WorkIsOrderedByPagesThenItemHeadAndRangeKeepingRowOrder) {
  // Sequences of several lengths, fused store passes with SDAR-4B heads (two tiles of 4 rows
  // per sequence, whose kv_end differ) and enough splits that a sequence's split tiles
  // interleave: with group_tiles the work goes longest first by whole pages, then by item (its
  // table's offset), KV head and range start; ties keep row order. Every work item is distinct
  // under that key with row0 last, so the order must be strictly increasing.
  const auto commit = ids(4), block = ids(4, 100), pages = ids(40, 1);
  std::vector<PassItem> items;
  for (const std::int64_t start : {1016, 508, 1268})
    items.push_back(denoising_item(block, pages, start));
  for (auto& item : items) item.commit = commit;
  const PassPlan plan = plan_pass(items, {32, 8, 396, 4096, 256, 128, 16});
  const auto work = plan.work();
  ASSERT_GT(plan.attn_combine, 0);  // split tiles are in the order
  const auto key = [](const AttnWork& w) {
    return std::tuple(-((w.kv_end - w.kv_begin + kPageTokens - 1) / kPageTokens), w.table,
                      w.kv_head, w.kv_begin, w.row0);
  };
  for (std::size_t i = 1; i < work.size(); ++i)
    EXPECT_LT(key(work[i - 1]), key(work[i])) << "work items " << i - 1 << " and " << i;
  expect_splits_cover_tiles(plan);
}

TEST(PlanPass, PairedTilesWhenNoSplitIsNeeded) {
  // SDAR-4B heads (32 / 8: tiles of 4 rows), fused store passes (4 commit rows + a block of 4:
  // two tiles per sequence) at 1,024 positions.
  const auto commit = ids(4), block = ids(4, 100), pages = ids(32, 1);
  const auto plan_for = [&](int sequences, std::int32_t heads, bool pair) {
    std::vector<PassItem> items(static_cast<std::size_t>(sequences),
                                denoising_item(block, pages, 1016));
    for (auto& item : items) item.commit = commit;
    PlanShape shape{heads, 8, 396, 4096, 256, 128, 16};
    shape.pair_tiles = pair;
    return plan_pass(items, shape);
  };
  // 128 sequences: 2,048 tiles x heads, paired into 1,024 items of 8 rows (32 query vectors),
  // none split; each pairs a sequence's commit rows (kv_end 1,020) with its block (1,024).
  const PassPlan paired = plan_for(128, 32, true);
  ASSERT_EQ(paired.attn_work, 128 * 8);
  EXPECT_EQ(paired.attn_combine, 0);
  for (const auto& w : paired.work()) {
    EXPECT_EQ(w.rows, 8);
    EXPECT_EQ(w.row0 % 8, 0);
    EXPECT_EQ(w.kv_begin, 0);
    EXPECT_EQ(w.kv_end, 1024);
    EXPECT_EQ(w.partial, -1);
  }
  EXPECT_EQ(plan_for(128, 32, false).attn_work, 128 * 8 * 2);
  // 16 sequences: 256 tiles x heads, 128 if paired, fewer than the 396 blocks: not paired, the
  // same plan as without pairing.
  const PassPlan few = plan_for(16, 32, true);
  EXPECT_EQ(few.bytes, plan_for(16, 32, false).bytes);
  EXPECT_EQ(few.attn_work, 16 * 2 * 8);
  // SDAR-1.7B heads (16 / 8: tiles of 8 rows): a fused store pass is one tile; nothing to pair.
  EXPECT_EQ(plan_for(128, 16, true).bytes, plan_for(128, 16, false).bytes);
  // A prefill of 8 commit rows and a block of 4 (SDAR-4B: tiles of rows 0-3, 4-7, 8-11): the
  // pair (0-7), whose kv_end is its later tile's, and the last tile alone.
  const auto long_commit = ids(8), long_pages = ids(1, 1);
  std::vector<PassItem> prefill(100, denoising_item(block, long_pages, 0));
  for (auto& item : prefill) item.commit = long_commit;
  PlanShape shape{32, 8, 396, 4096, 256, 128, 16};
  shape.pair_tiles = true;
  const PassPlan pp = plan_pass(prefill, shape);
  ASSERT_EQ(pp.attn_work, 100 * 8 * 2);
  std::vector<std::array<std::int32_t, 3>> first_item;  // row0, rows, kv_end
  for (const auto& w : pp.work())
    if (w.row0 < 12 && w.kv_head == 0) first_item.push_back({w.row0, w.rows, w.kv_end});
  std::sort(first_item.begin(), first_item.end());
  EXPECT_EQ(first_item, (std::vector<std::array<std::int32_t, 3>>{{0, 8, 8}, {8, 4, 12}}));
}

TEST(PlanPass, AttentionWorkItemsCountsTilesTimesKvHeads) {
  // Tiles of 16 / group rows per item, times the KV heads: what plan_pass makes unsplit.
  const auto commit = ids(4), block = ids(4, 100), pages = ids(32, 1);
  std::vector<PassItem> items(3, denoising_item(block, pages, 1016));
  items[1].commit = commit;  // 8 rows: one tile at group 2, two at group 4
  EXPECT_EQ(attention_work_items(items, 16, 8), 3 * 8);
  EXPECT_EQ(attention_work_items(items, 32, 8), 4 * 8);
  PlanShape shape{32, 8, 396, 4096, 256, 128, 16};
  shape.wave_splits = false;
  shape.split_align = 0;
  shape.min_split_keys = 1 << 20;  // no splits
  EXPECT_EQ(plan_pass(items, shape).attn_work, attention_work_items(items, 32, 8));
  EXPECT_THROW(attention_work_items(items, 12, 8), Error);
}

TEST(PlanPass, PairedWorkItemsCountEachItemsTilesTwoByTwo) {
  // The backend's deep pairs plan with exactly attention_paired_work_items as target work: every
  // tile that can pair does (a full tile and the next one of its item), none is split. Items of
  // 4 rows (one tile at group 4), 8 (two: one pair) and 12 (three: a pair and one alone).
  const auto block = ids(4, 100), pages = ids(32, 1);
  std::vector<PassItem> items(3, denoising_item(block, pages, 1016));
  const auto four = ids(4), eight = ids(8);
  items[1].commit = four;
  items[2].commit = eight;
  items[2].start = 1012;
  EXPECT_EQ(attention_work_items(items, 32, 8), (1 + 2 + 3) * 8);
  EXPECT_EQ(attention_paired_work_items(items, 32, 8), (1 + 1 + 2) * 8);
  // Group 2 (tiles of 8 rows): one tile each but the 12-row item's two, which pair.
  EXPECT_EQ(attention_paired_work_items(items, 16, 8), (1 + 1 + 1) * 8);
  PlanShape shape{32,   8,   static_cast<std::int32_t>(attention_paired_work_items(items, 32, 8)),
                  4096, 256, 128,
                  16};
  shape.pair_tiles = true;
  const PassPlan plan = plan_pass(items, shape);
  EXPECT_EQ(plan.attn_work, shape.target_work);
  EXPECT_EQ(plan.paired_items, 2 * 8);
  EXPECT_EQ(plan.attn_combine, 0);
  EXPECT_THROW(attention_paired_work_items(items, 12, 8), Error);
}

TEST(RouteAttention, DeepKernelsWhereTheirWorkFillsTheSms) {
  // CudaBackend's choice on 132 SMs, the deep and deep paired kernels one block per SM (their
  // grids at head_dim 128), for SDAR-1.7B's heads (16 over 8 KV heads: tiles of 8 rows) and
  // SDAR-4B's (32 over 8: tiles of 4 rows), `sequences` passes of 4 commit rows (or none) and a
  // block of 4 after 1,000 cached positions.
  constexpr std::int32_t kSms = 132, kGrid = 132;
  const auto block = ids(4, 100), commit = ids(4), pages = ids(40, 1);
  const auto route_with = [&](std::int32_t heads, int sequences, bool store, std::int32_t deep_grid,
                              std::int32_t paired_grid, std::int64_t min_keys = 0) {
    std::vector<PassItem> items(static_cast<std::size_t>(sequences),
                                denoising_item(block, pages, 1000));
    if (store)
      for (auto& item : items) item.commit = commit;
    return route_attention(items, heads, 8, kSms, deep_grid, paired_grid, min_keys);
  };
  const auto route = [&](std::int32_t heads, int sequences, bool store) {
    return route_with(heads, sequences, store, kGrid, kGrid).route;
  };
  using enum AttentionRoute;
  // SDAR-1.7B: one tile per KV head and sequence, 128 at 16 sequences: the deep kernel,
  // planned for its grid.
  const AttentionRouting deep = route_with(16, 16, true, kGrid, kGrid);
  EXPECT_EQ(deep.route, kDeep);
  EXPECT_EQ(deep.target_work, kGrid);
  EXPECT_EQ(route(16, 13, true), kDeep);     // 104 tiles >= 3/4 of 132
  EXPECT_EQ(route(16, 12, true), kDefault);  // 96 < 99
  EXPECT_EQ(route(16, 17, true), kDefault);  // 136 > the grid, and nothing pairs
  // SDAR-4B: a fused store pass has two tiles per KV head (256 at 16 sequences), 128 paired,
  // planned for exactly those.
  const AttentionRouting pairs = route_with(32, 16, true, kGrid, kGrid);
  EXPECT_EQ(pairs.route, kDeepPairs);
  EXPECT_EQ(pairs.target_work, 128);
  EXPECT_EQ(route(32, 16, false), kDeep);  // block-only passes: one tile per KV head
  EXPECT_EQ(route_with(32, 16, true, kGrid, 0).route, kDefault);  // no deep paired kernel
  EXPECT_EQ(route_with(32, 16, true, 0, 0).route, kDefault);
  // The positions limit: the items end at 1,008.
  EXPECT_EQ(route_with(32, 16, true, kGrid, kGrid, 1008).route, kDeepPairs);
  EXPECT_EQ(route_with(32, 16, true, kGrid, kGrid, 1009).route, kDefault);
  EXPECT_EQ(route_with(16, 16, true, kGrid, kGrid, 1009).route, kDeep);  // not the deep kernel's
  // Few or many sequences: the base plan (split ranges, or more items than blocks).
  for (const std::int32_t heads : {16, 32})
    for (const int sequences : {1, 4, 64, 128}) {
      const AttentionRouting base = route_with(heads, sequences, true, kGrid, kGrid);
      EXPECT_EQ(base.route, kDefault) << heads << " heads, " << sequences;
      EXPECT_EQ(base.target_work, 0) << heads << " heads, " << sequences;
      EXPECT_EQ(route(heads, sequences, false), kDefault) << heads << " heads, " << sequences;
    }
  EXPECT_THROW(route_with(12, 16, true, kGrid, kGrid), Error);  // 12 heads over 8 KV heads
}

TEST(PlanPass, PlannerReusingItsBuffersGivesFreshPlans) {
  // One PassPlanner over passes of different sizes and settings (split, paired, masked rows
  // only, then smaller again): every plan equals a fresh plan_pass's, nothing stale is left.
  const auto commit = ids(4), block = ids(4, 100), pages = ids(40, 1);
  const std::int32_t mask = 151669;
  const std::vector<std::int32_t> partly_masked{mask, 7, mask, 9};
  PassPlanner planner;
  const auto same = [&](const std::vector<PassItem>& items, const PlanShape& shape,
                        const std::string& what) {
    const PassPlan fresh = plan_pass(items, shape);
    const PassPlan& reused = planner.plan(items, shape);
    EXPECT_EQ(reused.bytes, fresh.bytes) << what;
    EXPECT_EQ(reused.rows, fresh.rows) << what;
    EXPECT_EQ(reused.block_rows, fresh.block_rows) << what;
    EXPECT_EQ(reused.pass_block_rows, fresh.pass_block_rows) << what;
    EXPECT_EQ(reused.block_row_of, fresh.block_row_of) << what;
    EXPECT_EQ(reused.attn_work, fresh.attn_work) << what;
    EXPECT_EQ(reused.attn_combine, fresh.attn_combine) << what;
    EXPECT_EQ(reused.partials, fresh.partials) << what;
    EXPECT_EQ(reused.paired_items, fresh.paired_items) << what;
    EXPECT_EQ(reused.kv_positions_read, fresh.kv_positions_read) << what;
    EXPECT_EQ(reused.attention_scores, fresh.attention_scores) << what;
  };
  PlanShape split{32, 8, 396, 4096, 256, 128, 16};
  std::vector<PassItem> many(64, denoising_item(block, pages, 1016));
  for (auto& item : many) item.commit = commit;
  std::vector<PassItem> one(1, denoising_item(block, pages, 1016));
  std::vector<PassItem> masked(3, denoising_item(partly_masked, pages, 512));
  for (auto& item : masked) item.masked_rows_only = true;
  PlanShape paired = split;
  paired.pair_tiles = true;
  paired.target_work = 64;
  same(many, split, "64 fused passes");
  same(one, split, "one sequence, split");
  same(many, paired, "64 fused passes, paired");
  same(masked, split, "masked rows only");
  same(one, split, "one sequence again");
  EXPECT_GT(planner.plan(one, split).attn_combine, 0);  // the paths above were taken
  EXPECT_GT(planner.plan(many, paired).paired_items, 0);
  const PassPlan& masked_plan = planner.plan(masked, split);
  EXPECT_LT(masked_plan.block_rows, masked_plan.pass_block_rows);
  EXPECT_THROW(planner.plan(one, PlanShape{12, 8, 1, 0}), Error);
  same(one, split, "after an error");
}

TEST(PlanPass, SeveralSequencesAndBadInput) {
  const auto a = ids(4), b = ids(8), c = ids(3);
  const std::vector<std::int32_t> pa{5}, pb{6, 8}, pc{2};
  std::vector<PassItem> items(3);
  items[0].block = a;
  items[0].start = 8;
  items[0].block_length = 4;
  items[0].pages = pa;
  items[1].commit = b;
  items[1].start = 28;
  items[1].block_length = 4;
  items[1].pages = pb;
  items[2].block = c;
  items[2].block_length = 4;
  items[2].pages = pc;
  const PassPlan plan = plan_pass(items, {4, 4, 1, 0});
  EXPECT_EQ(plan.rows, 15);
  EXPECT_EQ(plan.block_rows, 7);
  const auto rows = section<RowInfo>(plan, plan.header().rows_offset, 15);
  EXPECT_EQ(rows[4].position, 28);
  EXPECT_EQ(rows[4].page, 6);
  EXPECT_EQ(rows[8].position, 32);
  EXPECT_EQ(rows[8].page, 8);
  EXPECT_EQ(rows[8].kv_len, 36);
  EXPECT_EQ(rows[14].kv_len, 3);
  // Group 1 (MHA): 16 rows per tile.
  const auto tables = section<std::int32_t>(plan, plan.header().tables_offset, 4);
  EXPECT_EQ(tables, (std::vector<std::int32_t>{5, 6, 8, 2}));

  items[1].pages = std::span(pb).first(1);  // positions 32..35 have no page
  EXPECT_THROW(plan_pass(items, {4, 4, 1, 0}), Error);
  items[1].pages = pb;
  items[0].start = 6;  // not a multiple of the block length
  EXPECT_THROW(plan_pass(items, {4, 4, 1, 0}), Error);
  items[0].start = 8;
  EXPECT_THROW(plan_pass(items, {12, 4, 1, 0}), Error);  // group 3 does not divide 16
}

TEST(PlanPass, BucketRows) {
  EXPECT_EQ(bucket_rows(0), 0);
  EXPECT_EQ(bucket_rows(1), 8);
  EXPECT_EQ(bucket_rows(8), 8);
  EXPECT_EQ(bucket_rows(9), 16);
  EXPECT_EQ(bucket_rows(65), 96);
  EXPECT_EQ(bucket_rows(512), 512);
  EXPECT_EQ(bucket_rows(513), 576);
  EXPECT_EQ(bucket_rows(1025), 1152);
}

}  // namespace
}  // namespace dice::engine::cuda
