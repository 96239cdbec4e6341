#pragma once
// The paged KV cache's free pages and which one a growing sequence gets next (no CUDA calls:
// unit-tested without a GPU).

#include <cstdint>
#include <set>
#include <span>
#include <vector>

namespace dice::engine::cuda {

/// Free pages of a KV cache of `pages` pages, page 0 being the scratch page (never handed out).
///
/// The choice of page: with runs of `run_pages` > 1 pages (the pages whose layer slices share one
/// 2 MiB GPU page, kv_run_pages), a sequence's next page is the one after its last where that is
/// free and in the same run, else the first page of a wholly free run, else the lowest free page.
/// So sequences that grow side by side keep their pages in runs of their own, and one attention
/// block reads a sequence's KV through few address translations instead of one every page or two
/// (16 interleaved sequences). With run_pages 1: the lowest free page. Only which page changes;
/// the counts (free(), what fits) do not.
class PagePool {
 public:
  /// Throws dice::Error unless pages >= 1 and run_pages >= 1.
  PagePool(std::int32_t pages, std::int32_t run_pages);

  /// Pages free (page 0 excluded).
  [[nodiscard]] std::int64_t free() const { return std::ssize(free_); }
  [[nodiscard]] std::int32_t run_pages() const { return run_pages_; }

  /// Appends `count` free pages to `owned` (a sequence's pages, in position order), chosen as the
  /// class comment says. Throws dice::Error (changing nothing) when fewer than `count` are free.
  void take(std::vector<std::int32_t>& owned, std::int64_t count);

  /// Frees `pages` (pages taken from this pool and not given back since). Throws dice::Error,
  /// changing nothing, on page 0, a page out of range or a page that is free already.
  void give_back(std::span<const std::int32_t> pages);

 private:
  [[nodiscard]] std::int32_t choose(std::int32_t last) const;
  void mark_taken(std::int32_t page);

  std::int32_t pages_;
  std::int32_t run_pages_;
  std::set<std::int32_t> free_;         ///< free pages, lowest first
  std::vector<std::int32_t> run_free_;  ///< free pages of each run
  std::set<std::int32_t> free_runs_;    ///< runs whose pages are all free, lowest first
};

/// Pages a run for PagePool: how many pages' slices of one layer's K (or V) cache, each
/// `layer_page_bytes` long, one 2 MiB GPU page holds (at least 1). SDAR's 8 KV heads of 128
/// (bf16, 32 positions a page): 64 KiB a slice, 32 pages a run.
std::int32_t kv_run_pages(std::int64_t layer_page_bytes);

}  // namespace dice::engine::cuda
