#pragma once
// Host-side planning of the CUDA backend's forwards (no CUDA calls: unit-tested without a GPU).
//
// split_forward cuts a forward into passes that fit the work buffers; plan_pass lays out one
// pass's rows and builds its metadata block (ops.h): per-row token, position, visible KV length
// and cache slot; the block rows and their sampling parameters; the attention work list (tiles
// of 16 query vectors per KV head, KV ranges split when there are too few tiles to fill the GPU)
// and the page tables.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dice/engine/sampling.h"
#include "ops.h"

namespace dice::engine::cuda {

/// Sizes of one forward item for split_forward.
struct ItemSize {
  std::int64_t commit = 0;        ///< commit tokens (a multiple of block_length)
  std::int64_t block = 0;         ///< block rows (at most block_length)
  std::int32_t block_length = 1;  ///< B
};

/// A piece of a forward: item `item`'s commit tokens [commit_begin, commit_end), with its block
/// rows when `with_block` (always in the item's last piece).
struct PassPiece {
  std::size_t item = 0;
  std::int64_t commit_begin = 0;
  std::int64_t commit_end = 0;
  bool with_block = false;
};

/// Groups the items, in order, into passes of at most `max_rows` rows and `max_block_rows` block
/// rows. An item too large for an empty pass has its commit cut into chunks of whole blocks, each
/// a pass of its own, in order (exact: a chunk never attends to a later one). Every item gets a
/// piece, empty ones included. Throws dice::Error if 2 * block_length > max_rows or
/// block_length > max_block_rows (no progress possible).
std::vector<std::vector<PassPiece>> split_forward(std::span<const ItemSize> items,
                                                  std::int64_t max_rows,
                                                  std::int64_t max_block_rows);

/// One sequence's rows in a pass.
struct PassItem {
  std::span<const std::int32_t> commit;  ///< committed this pass (whole blocks)
  std::span<const std::int32_t> block;   ///< block rows (get proposals), may be empty
  std::int64_t start = 0;                ///< cached positions before this pass (a multiple of B)
  std::int32_t block_length = 1;
  std::span<const std::int32_t> pages;  ///< the sequence's page ids, covering start + rows
  SamplingParams sampling;
  std::int32_t step = 0;
  /// Only block rows holding sampling.mask_id get logits (ForwardRequest::masked_rows_only):
  /// the others are left out of the pass's block rows (PassPlan::block_row_of).
  bool masked_rows_only = false;
};

/// What plan_pass needs of the model and the device.
struct PlanShape {
  std::int32_t heads = 1;
  std::int32_t kv_heads = 1;
  std::int32_t target_work = 1;   ///< split KV ranges until about this many work items exist
  std::int32_t max_partials = 0;  ///< partial slots available for split tiles
  /// A split KV range holds at least this many positions (rounded up to whole pages, at least
  /// 2): short contexts are not split, so their pass needs no combine. 0: the first planner's
  /// rule (ceil(kv_end / 64) splits, so ranges of 33 to 64 positions).
  std::int32_t min_split_keys = 256;
  /// 0: split ranges as min_split_keys says (whole pages). > 0 (a multiple of kPageTokens; the
  /// pipelined attention kernel's attention_split_align): a tile whose KV range holds two
  /// min_split_keys ranges is split into up to `wanted` ranges (wanted: as above, the target
  /// work over the tiles) of a multiple of split_align positions (the last one shorter), at
  /// most max_splits (and kMaxMergedSplits) of them.
  std::int32_t split_align = 0;
  /// With split_align: most splits per tile, 0: kMaxMergedSplits. Capped at kMaxMergedSplits.
  std::int32_t max_splits = 0;
  /// With split_align: the split count s (at most max_splits and the longest tile's kv_end /
  /// split_align) that minimises the estimated makespan ceil(tiles x kv_heads x s /
  /// target_work) x (range + one unit) over the longest tile, where range = its kv_end / s
  /// rounded up to split_align and one unit (split_align positions) stands for an item's fixed
  /// cost (an estimate, not fitted; measured only against the earlier rule and 512-position
  /// splits); fewer splits on ties. false: s = ceil(target_work / (tiles x kv_heads)), which
  /// can leave a second, mostly idle wave (bench/results/2026-11-23-engine-attention-h100: 4B
  /// at 16 x 1,024, 512 items for 396 blocks; -balanced-plan-h100 for the rule's effect).
  bool wave_splits = true;
  /// Work items of one sequence's tiles with the same KV head and range next to each other in
  /// launch order, and "longest first" by whole pages: the tiles of a pass item read the same
  /// K/V pages (a group of 4 or more query heads per KV head makes several tiles of one block),
  /// and neighbours in launch order run at the same time, so the second read comes from L2.
  /// false: work sorted by exact range length only, which puts a sequence's commit-row tile
  /// (kv_end 4 positions shorter) a whole wave after its block-row tile.
  bool group_tiles = true;
  /// Two tiles of one pass item (a full tile of 16 query vectors and the next one) in one work
  /// item of 32 query vectors, read by warp pairs that share each K/V page (launched as
  /// AttentionKernel::kTensorCoresPaired; the other kernels trap on pairs), when the paired
  /// items still number at least target_work, so that no item needs a split. With 4 or more
  /// query heads per KV head a fused store pass (4 commit rows + a block of 4) is two tiles per
  /// KV head that read the same pages; paired, each page comes into shared memory once instead
  /// of twice.
  bool pair_tiles = false;
  /// With wave_splits, where the unsplit work items number at least 3/4 of the SMs (sms):
  /// positions of fixed cost that splitting adds to the makespan estimate (the split merge: partial
  /// results written, counted in, read back by the last item; ~5 us per tile at 1 sequence,
  /// bench/results/2026-11-23-engine-paired-tiles-h100). Measured there at 16 sequences and
  /// 576-1,024 positions, splitting was 5-17% slower per attention launch than not splitting. Below
  /// that, splitting is what brings idle SMs' bandwidth in and the cost is not counted (at 1
  /// sequence splits win: 12.9 against 16.0 us at 1,024 positions). 0: splits cost nothing
  /// extra (the earlier estimate).
  std::int32_t split_cost = 768;
  /// SMs of the device, for split_cost's threshold; 0: target_work / 3 (the pipelined kernel's
  /// 3 resident blocks per SM).
  std::int32_t sms = 0;
};

/// A pass's metadata block and its counts.
struct PassPlan {
  std::vector<std::byte> bytes;  ///< PassHeader then its sections, 16-byte aligned
  std::int32_t rows = 0;
  std::int32_t block_rows = 0;  ///< block rows that get logits (PassHeader::block_rows)
  /// Block rows of the pass's items, those without logits (PassItem::masked_rows_only) included.
  std::int32_t pass_block_rows = 0;
  /// For each block row that gets logits, its index among the pass_block_rows (ascending).
  std::vector<std::int32_t> block_row_of;
  std::int32_t attn_work = 0;
  std::int32_t attn_combine = 0;
  std::int32_t partials = 0;      ///< partial slots used
  std::int32_t paired_items = 0;  ///< work items of two tiles (PlanShape::pair_tiles)
  std::int64_t kv_positions_read = 0;
  std::int64_t attention_scores = 0;
  const PassHeader& header() const { return *reinterpret_cast<const PassHeader*>(bytes.data()); }
  /// The attention work items, in launch order (a view into bytes).
  std::span<const AttnWork> work() const {
    return {pass_section<AttnWork>(&header(), header().work_offset),
            static_cast<std::size_t>(attn_work)};
  }
  /// The split tiles, one per AttnCombine (a view into bytes).
  std::span<const AttnCombine> combines() const {
    return {pass_section<AttnCombine>(&header(), header().combine_offset),
            static_cast<std::size_t>(attn_combine)};
  }
};

/// Builds the metadata of one pass: rows in item order (commit rows, then block rows). Row r of
/// an item at position p = start + r attends to [0, kv_len): (p / B + 1) * B for commit rows,
/// start + rows for block rows; its K/V goes to page pages[p / kPageTokens], slot
/// p % kPageTokens. Block rows get logits (block index and sampling sections) in row order, but
/// for those a masked_rows_only item leaves out (tokens other than its mask id). Throws dice::Error
/// naming the item if its pages do not cover its rows, if start is not a multiple of B, or if heads
/// is not kv_heads times a divisor of 16.
PassPlan plan_pass(std::span<const PassItem> items, const PlanShape& shape);

/// plan_pass with its buffers (the plan's and the planning's) kept from one call to the next, so
/// that planning a pass allocates nothing once they have grown: the backend plans every pass
/// through one. Fresh buffers cost page faults each forward (~100 KB at 128 sequences: 85-156 ->
/// 15-16 us per plan on the CPU of bench/results/2026-11-24-plan-pass-cpu). Not thread-safe.
class PassPlanner {
 public:
  PassPlanner();
  ~PassPlanner();
  PassPlanner(const PassPlanner&) = delete;
  PassPlanner& operator=(const PassPlanner&) = delete;

  /// The plan of plan_pass(items, shape), valid until the next call. Throws as plan_pass.
  const PassPlan& plan(std::span<const PassItem> items, const PlanShape& shape);

 private:
  struct Scratch;
  PassPlan plan_;
  std::unique_ptr<Scratch> scratch_;
};

/// Work items plan_pass makes for `items` before any split or pairing: tiles (kTileQueries /
/// (heads / kv_heads) rows of one item each) times kv_heads.
std::int64_t attention_work_items(std::span<const PassItem> items, std::int32_t heads,
                                  std::int32_t kv_heads);

/// Work items plan_pass makes for `items` with every tile paired that can be (PlanShape::
/// pair_tiles: each item's tiles two by two, its last one alone when their count is odd), none
/// split, times kv_heads.
std::int64_t attention_paired_work_items(std::span<const PassItem> items, std::int32_t heads,
                                         std::int32_t kv_heads);

/// Where a pass's attention runs, by CudaBackend's rule (its kernel and plan follow from it).
enum class AttentionRoute {
  kDefault,    ///< the base plan on the pipelined kernel (or the paired one, if it pairs tiles)
  kDeep,       ///< AttentionKernel::kTensorCoresDeep, planned for its grid, never paired
  kDeepPairs,  ///< the deep paired kernel, planned for exactly the pairs (none split)
};

/// A pass's AttentionRoute and, for kDeep and kDeepPairs, the plan's PlanShape::target_work
/// (the deep kernel's grid; the paired work items); 0 for kDefault (the base plan's).
struct AttentionRouting {
  AttentionRoute route = AttentionRoute::kDefault;
  std::int32_t target_work = 0;
};

/// The route of the pass `items` (heads over kv_heads) on `sms` SMs, with the deep kernel's grid
/// `deep_grid` and the deep paired kernel's `deep_paired_grid` (0: that kernel is off). A kernel
/// "fits" when the work items number at most its grid and at least 3/4 of the SMs.
/// - kDeep where the unsplit tiles (attention_work_items) fit the deep kernel: one item per SM,
///   13-16 sequences of SDAR-1.7B, whose one page per warp in flight leaves the pipelined kernel
///   latency-bound. With fewer tiles the items are split into one-page ranges, where depth does
///   not help (0.5-1% slower at 1 sequence; bench/results/2026-11-23-engine-paired-tiles-h100).
/// - else kDeepPairs where pairing leaves fewer items (attention_paired_work_items), the pairs
///   fit the deep paired kernel, and some item ends at or past `deep_pairs_min_keys` positions
///   (start + its rows; 0: no limit): SDAR-4B's fused store passes at 13-16 sequences, two tiles
///   per KV head that the pipelined kernel reads page by page twice
///   (bench/results/2026-11-29-deep-pairs-h200).
/// - else kDefault.
/// The pairs and the items' ends are counted only where the route depends on them. Throws
/// dice::Error as attention_work_items for a bad head split.
AttentionRouting route_attention(std::span<const PassItem> items, std::int32_t heads,
                                 std::int32_t kv_heads, std::int32_t sms, std::int32_t deep_grid,
                                 std::int32_t deep_paired_grid, std::int64_t deep_pairs_min_keys);

/// Rows rounded up to the bucket of CUDA graph shapes: multiples of 8 up to 64, of 32 up to 256,
/// of 64 up to 1024, then of 128.
std::int32_t bucket_rows(std::int32_t rows);

}  // namespace dice::engine::cuda
