#pragma once
// The interface every forward implementation serves (CPU reference now, CUDA later): a batched
// forward over many sequences, each with its own KV cache, that commits tokens to the cache and/or
// scores the block being denoised (system.md §2).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dice/engine/sampling.h"

namespace dice::engine {

/// Names one sequence of a backend (chosen by the caller, unique among open sequences).
using SequenceId = std::int64_t;

/// One sequence's part of a batched forward.
///
/// Positions: the sequence's KV cache holds positions [0, C); `commit` occupies [C, C + n) and
/// `block` [C + n, C + n + m). Attention is block-causal with the sequence's block length B
/// (token i sees token j iff floor(j/B) <= floor(i/B), system.md §2):
///  - `commit` rows (a prompt prefill chunk or finished blocks: n a multiple of B) see the cache
///    and the commit rows of their own and earlier blocks; their K/V is appended to the cache.
///  - `block` rows (the block being denoised, 0 <= m <= B, may hold the mask id) see the cache, the
///    whole commit and the whole block (bidirectional inside the block); nothing of them is
///    cached, and they are the only rows that get logits/proposals.
/// So one item covers prefill (commit only), a denoising step (block only), the store pass
/// (commit only) and the fused store pass (the finished block as commit + the next block).
struct ForwardItem {
  SequenceId sequence = 0;
  std::span<const std::int32_t> commit;
  std::span<const std::int32_t> block;
  std::int32_t step = 0;    ///< denoising step of `block` within its block (RNG counter)
  SamplingParams sampling;  ///< how proposals for `block` are drawn
};

/// What a forward should return.
struct ForwardRequest {
  bool proposals = true;  ///< per block row: token, confidence, entropy (sampling.h)
  bool logits = false;    ///< per block row: fp32 logits over every vocabulary row
  /// Proposals only where they can be used: a block row that does not hold its item's mask
  /// token (SamplingParams::mask_id; a position decided at an earlier denoising step, or a
  /// given token of an infilling block) gets Proposal{its token, 1, 0}, and a backend may skip
  /// its lm_head row and vocabulary pass. Remasking reads proposals of masked positions only
  /// (remasking.h), so decoding is unchanged. Ignored when `logits` is requested.
  bool masked_rows_only = false;

  /// Whether a backend may leave decided block rows without logits: masked_rows_only with
  /// proposals and without logits.
  bool skips_decided_rows() const { return masked_rows_only && proposals && !logits; }
};

/// What every block row of `items` proposes when it is decided (ForwardRequest::
/// masked_rows_only): Proposal{its token, 1, 0}, written to `proposals` (one per block row, in
/// item order, as ForwardOutput::proposals). A backend writes this first, then the proposals of
/// the rows it computed over it. Throws dice::Error if `proposals` is not one per block row.
void propose_decided_rows(std::span<const ForwardItem> items, std::span<Proposal> proposals);

/// The results of a batched forward, rows in item order.
struct ForwardOutput {
  /// Item i's block rows are rows [row_offsets[i], row_offsets[i + 1]); size items + 1.
  std::vector<std::size_t> row_offsets;
  std::vector<Proposal> proposals;  ///< [rows] when requested
  std::vector<float> logits;        ///< [rows, vocab_rows] row-major when requested
  std::int64_t vocab_rows = 0;      ///< logit columns (the padded vocabulary, e.g. 151936)
};

/// A model that runs forwards over sequences with per-sequence KV caches.
/// Not thread-safe: one caller at a time.
class Backend {
 public:
  virtual ~Backend() = default;

  /// Rows of the embedding and lm_head (the padded vocabulary, e.g. 151936).
  virtual std::int64_t vocab_rows() const = 0;
  /// Starts an empty KV cache for `sequence` with block length `block_length` (the unit of its
  /// block-causal mask). Throws dice::Error if the id is already open or block_length < 1.
  virtual void open(SequenceId sequence, std::int32_t block_length) = 0;
  /// Frees the sequence's KV cache. Unknown ids are ignored.
  virtual void close(SequenceId sequence) = 0;
  /// Tokens in the sequence's KV cache. Throws dice::Error for an unknown id.
  virtual std::int64_t cached_tokens(SequenceId sequence) const = 0;

  /// Runs one forward over `items` (each sequence at most once, each open). Commits every item's
  /// `commit` to its cache and fills `out` as `request` asks. Throws dice::InputError naming the
  /// sequence and position for a token id outside [0, vocab_rows), dice::Error for a commit that
  /// is not a whole number of blocks, a block longer than B, an unknown or repeated sequence;
  /// nothing is committed when it throws on such input.
  virtual void forward(std::span<const ForwardItem> items, const ForwardRequest& request,
                       ForwardOutput& out) = 0;

  // Admission control, for backends whose KV cache is bounded (the CUDA backend's page pool).
  // The defaults describe an unbounded cache (the CPU backend).

  /// Whether reserve() of `tokens` cache positions for a newly opened sequence would succeed now.
  virtual bool can_reserve(std::int64_t /*tokens*/) const { return true; }
  /// The most positions one sequence could ever reserve (the whole cache); nullopt: unbounded.
  virtual std::optional<std::int64_t> cache_limit_tokens() const { return std::nullopt; }
  /// Takes room for `tokens` positions of an open sequence's cache now, so that its forwards
  /// never run out (positions written temporarily by block rows included). Throws dice::Error
  /// naming the sequence when the cache cannot hold them. Default: nothing to do.
  virtual void reserve(SequenceId /*sequence*/, std::int64_t /*tokens*/) {}

  // Growth page by page (CacheAdmission::kGrowAndPreempt in block_decoder.h): the cache is a
  // pool of pages; a sequence takes pages as its forwards need them and gives them all back on
  // close().

  /// Pages free now; nullopt: the cache is unbounded (nothing ever needs to be preempted).
  virtual std::optional<std::int64_t> free_cache_pages() const { return std::nullopt; }
  /// Pages `sequence` would take beyond those it holds to hold `tokens` positions (a sequence
  /// that is not open holds none). 0 for an unbounded cache.
  virtual std::int64_t cache_pages_to_hold(SequenceId /*sequence*/, std::int64_t /*tokens*/) const {
    return 0;
  }
};

}  // namespace dice::engine
