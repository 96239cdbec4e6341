#include "page_pool.h"

#include <fmt/format.h>

#include <algorithm>

#include "dice/core/error.h"

namespace dice::engine::cuda {

PagePool::PagePool(std::int32_t pages, std::int32_t run_pages)
    : pages_(pages), run_pages_(run_pages) {
  if (pages < 1 || run_pages < 1)
    throw Error(fmt::format("KV page pool: {} pages in runs of {}: expected at least 1 of each",
                            pages, run_pages));
  const std::int32_t runs = (pages + run_pages - 1) / run_pages;
  run_free_.assign(static_cast<std::size_t>(runs), 0);
  for (std::int32_t p = 1; p < pages; ++p) {
    free_.insert(free_.end(), p);
    ++run_free_[static_cast<std::size_t>(p / run_pages)];
  }
  // A run is wholly free when it holds run_pages free pages: the last, shorter run and run 0
  // (the scratch page) never are.
  for (std::int32_t r = 0; r < runs; ++r)
    if (run_free_[static_cast<std::size_t>(r)] == run_pages) free_runs_.insert(free_runs_.end(), r);
}

std::int32_t PagePool::choose(std::int32_t last) const {
  if (run_pages_ > 1) {
    const std::int32_t next = last + 1;
    if (last > 0 && next % run_pages_ != 0 && free_.contains(next)) return next;
    if (!free_runs_.empty()) return *free_runs_.begin() * run_pages_;
  }
  return *free_.begin();
}

void PagePool::mark_taken(std::int32_t page) {
  free_.erase(page);
  const std::int32_t run = page / run_pages_;
  if (run_free_[static_cast<std::size_t>(run)]-- == run_pages_) free_runs_.erase(run);
}

void PagePool::take(std::vector<std::int32_t>& owned, std::int64_t count) {
  if (count < 0 || count > free())
    throw Error(
        fmt::format("KV page pool: {} pages asked for, {} of {} free", count, free(), pages_ - 1));
  owned.reserve(owned.size() + static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int32_t page = choose(owned.empty() ? 0 : owned.back());
    mark_taken(page);
    owned.push_back(page);
  }
}

void PagePool::give_back(std::span<const std::int32_t> pages) {
  std::vector<std::int32_t> sorted(pages.begin(), pages.end());
  std::ranges::sort(sorted);
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const std::int32_t p = sorted[i];
    if (p < 1 || p >= pages_ || free_.contains(p) || (i > 0 && sorted[i - 1] == p))
      throw Error(fmt::format(
          "KV page pool: cannot give back page {}: not a page taken from this pool of {}", p,
          pages_));
  }
  for (const std::int32_t p : sorted) {
    free_.insert(p);
    const std::int32_t run = p / run_pages_;
    if (++run_free_[static_cast<std::size_t>(run)] == run_pages_) free_runs_.insert(run);
  }
}

std::int32_t kv_run_pages(std::int64_t layer_page_bytes) {
  constexpr std::int64_t kGpuPageBytes = std::int64_t{2} << 20;
  if (layer_page_bytes <= 0 || layer_page_bytes >= kGpuPageBytes) return 1;
  return static_cast<std::int32_t>(kGpuPageBytes / layer_page_bytes);
}

}  // namespace dice::engine::cuda
