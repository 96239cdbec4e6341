// PagePool: which free page a growing sequence gets (no GPU needed).
#include "page_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "dice/core/error.h"

namespace dice::engine::cuda {
namespace {

/// Distinct runs of `run_pages` pages that `pages` touch.
std::int64_t runs_touched(const std::vector<std::int32_t>& pages, std::int32_t run_pages) {
  std::vector<std::int32_t> runs;
  for (const std::int32_t p : pages) runs.push_back(p / run_pages);
  std::ranges::sort(runs);
  return std::ranges::distance(runs.begin(), std::ranges::unique(runs).begin());
}

TEST(PagePool, SequencesGrowingSideBySideKeepRunsOfTheirOwn) {
  // 16 sequences taking a page each in turn, 64 pages each (SDAR at 16 x 2,048 positions), from a
  // pool of 4,096 pages in runs of 32.
  PagePool pool(4096, 32);
  std::vector<std::vector<std::int32_t>> owned(16);
  for (int round = 0; round < 64; ++round)
    for (auto& pages : owned) pool.take(pages, 1);
  EXPECT_EQ(pool.free(), 4095 - 16 * 64);
  for (const auto& pages : owned) {
    EXPECT_EQ(runs_touched(pages, 32), 2);  // 64 pages: two whole runs
    for (std::size_t i = 1; i < pages.size(); ++i)
      if (pages[i] % 32 != 0) {
        EXPECT_EQ(pages[i], pages[i - 1] + 1);
      }
  }
  // Without runs, the lowest free page: the sequences interleave, one run every page or two.
  PagePool lowest(4096, 1);
  std::vector<std::vector<std::int32_t>> interleaved(16);
  for (int round = 0; round < 64; ++round)
    for (auto& pages : interleaved) lowest.take(pages, 1);
  EXPECT_EQ(lowest.free(), pool.free());
  EXPECT_EQ(interleaved[0][1], interleaved[0][0] + 16);
  EXPECT_GE(runs_touched(interleaved[0], 32), 32);
}

TEST(PagePool, EveryPageIsHandedOutOnceAndCountsMatch) {
  // Runs of 8 over 100 pages (12 whole runs; the 13th is short). Page 0 is never handed out.
  PagePool pool(100, 8);
  std::vector<std::int32_t> a, b, c;
  pool.take(a, 5);
  pool.take(b, 20);
  pool.take(c, 3);
  EXPECT_EQ(pool.free(), 99 - 28);
  pool.give_back(b);
  EXPECT_EQ(pool.free(), 99 - 8);
  b.clear();
  // Taking what is left hands out each free page once, never page 0 or a held page.
  pool.take(b, pool.free());
  EXPECT_EQ(pool.free(), 0);
  std::vector<std::int32_t> all;
  for (const auto* pages : {&a, &b, &c}) all.insert(all.end(), pages->begin(), pages->end());
  std::ranges::sort(all);
  ASSERT_EQ(all.size(), 99U);
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], static_cast<std::int32_t>(i + 1));
}

TEST(PagePool, FragmentedPoolsFallBackToTheLowestFreePage) {
  // Two runs of 4 over pages 1..7 (run 0 holds the scratch page): once no run is wholly free and
  // the next page is taken, a sequence gets the lowest free page.
  PagePool pool(8, 4);
  std::vector<std::int32_t> a, b;
  pool.take(a, 1);  // the first wholly free run: page 4
  EXPECT_EQ(a, (std::vector<std::int32_t>{4}));
  pool.take(b, 1);  // no run wholly free: the lowest free page
  EXPECT_EQ(b, (std::vector<std::int32_t>{1}));
  pool.take(a, 4);  // 5, 6, 7, then the run ends: the lowest free page
  EXPECT_EQ(a, (std::vector<std::int32_t>{4, 5, 6, 7, 2}));
}

TEST(PagePool, BadRequestsThrowAndChangeNothing) {
  EXPECT_THROW(PagePool(0, 1), Error);
  EXPECT_THROW(PagePool(10, 0), Error);
  PagePool pool(10, 4);
  std::vector<std::int32_t> a;
  EXPECT_THROW(pool.take(a, 10), Error);  // 9 free
  EXPECT_TRUE(a.empty());
  pool.take(a, 2);
  const std::int64_t free = pool.free();
  for (const std::vector<std::int32_t>& bad :
       std::vector<std::vector<std::int32_t>>{{0}, {10}, {-1}, {a[0], a[0]}, {a[0], 9}})
    EXPECT_THROW(pool.give_back(bad), Error) << bad.size();
  EXPECT_EQ(pool.free(), free);
  pool.give_back(a);
  EXPECT_EQ(pool.free(), 9);
}

TEST(PagePool, RunPagesFollowTheTwoMibGpuPage) {
  EXPECT_EQ(kv_run_pages(8 * 32 * 128 * 2), 32);  // SDAR: 8 KV heads of 128, bf16
  EXPECT_EQ(kv_run_pages(3 << 20), 1);
  EXPECT_EQ(kv_run_pages(0), 1);
}

}  // namespace
}  // namespace dice::engine::cuda
