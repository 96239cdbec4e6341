#pragma once
// Block-diffusion decoding (system.md §2): the per-sequence state machine and the loop that runs
// many sequences through one backend, one batched forward per iteration.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "dice/engine/backend.h"
#include "dice/engine/generation.h"

namespace dice::engine {

/// The decoding state of one sequence between forwards.
///
/// The prompt (P tokens) is split: floor(P/B)*B tokens are prefilled, the P mod B rest starts the
/// first block and mask tokens fill it. Each block is denoised for at most `steps` steps; each
/// step proposes a token per position (sampling.h) and unmasks the positions the remasking
/// strategy selects (remasking.h), with the transfer schedule computed from the block's masked
/// positions when it starts; the last allowed step unmasks every remaining mask. A finished block
/// is committed to the KV cache by the next forward (the store pass), fused with the next block's
/// first denoising step unless `fused_store` is off (the prefill is fused with the first block's
/// first step in the same way).
///
/// The generation ends as soon as its output is decided: when a stop id and every position
/// before it have been unmasked (the output then ends with that stop id), or when the
/// max_new_tokens-th output position and every position before it have been unmasked. Positions
/// after that point in the same block are discarded, and no store pass is run for the last block.
class SequenceDecoder {
 public:
  /// Validates `options` (dice::InputError naming the option) and prepares the first block.
  /// Throws dice::InputError if a prompt id is the mask id.
  SequenceDecoder(std::vector<std::int32_t> prompt, GenerationOptions options);

  /// True once the output is decided (no more forwards needed).
  bool done() const { return done_; }
  /// This sequence's part of the next forward (spans into this object; valid until advance()).
  /// Must not be called once done().
  ForwardItem next_item(SequenceId sequence) const;
  /// Applies the forward of next_item(): `proposals` holds one proposal per block row (empty for
  /// a commit-only forward). Throws dice::Error if their number does not match the item.
  void advance(std::span<const Proposal> proposals);

  /// Output tokens that can no longer change (finished blocks, or all once done()).
  std::span<const std::int32_t> settled_output() const;
  const GenerationOptions& options() const { return options_; }
  /// The backend dropped this sequence's KV cache (a preemption): the next item commits every
  /// token committed so far again, with what was pending (a prefill that recomputes the cache),
  /// and then decoding goes on where it was; the block being denoised lives here, not in the
  /// cache, so nothing of it is lost. The recompute rides with the block's next denoising step
  /// (also without a fused store, unless a store pass was pending anyway), so the forwards and
  /// the decoding trace are those of a run without the preemption. Throws dice::Error once
  /// done().
  void preempt();
  /// Positions the sequence's cache holds after the next forward (commit and block rows).
  std::int64_t next_cache_end() const;
  /// The result; complete once done() (counts and trace so far before).
  GenerationResult result() const;

 private:
  /// Whether the next forward runs a denoising step of the current block (else it only commits).
  bool has_block() const;
  void start_block(std::int64_t start);
  void denoise(std::span<const Proposal> proposals);
  void finish(StopReason reason, std::int64_t last_position);

  GenerationOptions options_;
  std::int64_t prompt_length_ = 0;
  std::vector<std::int32_t> tokens_;  ///< prompt + generated so far + the current block
  std::vector<TokenTrace> trace_;     ///< per position from prompt_length_ on
  std::int64_t block_start_ = 0;
  std::int32_t step_ = 0;  ///< next denoising step within the current block
  std::vector<std::int32_t> schedule_;
  std::int64_t committed_ = 0;      ///< tokens in the backend's cache (0 again after preempt())
  std::int64_t recompute_end_ = 0;  ///< tokens that were cached before the last preemption
  std::int64_t commit_end_ = 0;     ///< the next forward commits [committed_, commit_end_)
  std::int64_t settled_end_ = 0;    ///< tokens before this position are final
  bool done_ = false;
  StopReason stop_reason_ = StopReason::kLength;
  GenerationCounts counts_;
  /// denoise()'s buffers, kept between steps (no allocation per step): the block's mask flags
  /// (block_length of them), select_unmask's output and its scratch.
  std::unique_ptr<bool[]> masked_;
  std::vector<std::int32_t> chosen_, order_;
};

/// One generation: prompt token ids (already chat-templated) and its options.
struct GenerationRequest {
  std::vector<std::int32_t> prompt_ids;
  GenerationOptions options;
};

/// Called whenever a request's settled output grows: its index and the new tokens.
using OutputCallback =
    std::function<void(std::size_t request, std::span<const std::int32_t> new_tokens)>;

/// Tokens of KV cache a request may come to need: prompt plus max_new_tokens, rounded up to whole
/// blocks (block rows are written to the cache while they are denoised).
std::int64_t cache_tokens_needed(const GenerationRequest& request);

/// How generate() finds KV cache room for sequences on a backend with a bounded cache (the CPU
/// backend's is unbounded: both behave the same there). A bounded backend that does not count
/// pages (Backend::free_cache_pages() is nullopt) always gets kReserveWhole.
enum class CacheAdmission {
  /// A request joins once its whole need (cache_tokens_needed) can be reserved
  /// (Backend::can_reserve / reserve); nothing is ever preempted. Sequences that stop early
  /// leave their reservation unused.
  kReserveWhole,
  /// Caches grow page by page as forwards need them. A request joins once its first two
  /// forwards fit beside the running sequences' next two. When a forward does not fit, the most
  /// recently admitted running sequences are preempted: their caches are dropped, they wait at
  /// the head of the queue, and, since nothing joins after a preemption until a sequence has
  /// finished, they rejoin once finished sequences have freed room, with a prefill that
  /// recomputes the dropped cache (SequenceDecoder::preempt). This is the
  /// recomputation preemption of vLLM (Kwon et al., "Efficient Memory Management for Large
  /// Language Model Serving with PagedAttention", SOSP 2023, §4.5).
  kGrowAndPreempt,
};

/// How generate() runs its batch.
struct ScheduleOptions {
  SequenceId first_id = 0;     ///< backend sequence ids first_id, first_id + 1, ...
  std::size_t max_active = 0;  ///< sequences decoded at once (0: as many as the cache holds)
  CacheAdmission admission = CacheAdmission::kGrowAndPreempt;
};

/// What generate()'s scheduler did (the per-sequence counts are in GenerationCounts).
struct ScheduleStats {
  std::int64_t forwards = 0;           ///< batched forwards run
  std::size_t peak_active = 0;         ///< the most sequences in one forward
  std::int64_t preemptions = 0;        ///< caches dropped to make room (kGrowAndPreempt)
  std::int64_t recomputed_tokens = 0;  ///< tokens committed again after preemptions
};

/// Runs `requests` to completion on `backend`: every unfinished sequence takes part in every
/// forward (one item each); a sequence leaves the batch when its output is decided, and the next
/// waiting request (in request order) joins as soon as the backend's cache has room for it
/// (`schedule.admission`) and fewer than `schedule.max_active` sequences run (0: no limit), so
/// the batch never drains while requests wait. Sequences are opened on the backend with ids
/// 0..n-1 offset by `schedule.first_id` and closed when they finish (or are preempted). Results
/// (in request order: output tokens, traces, forwards; not the preemption counts or seconds) do
/// not depend on which requests share the batch or on preemptions, on a backend whose rows do not
/// depend on each other (a preempted sequence's cache is recomputed by a prefill: on a GPU its
/// last bits may differ from the cache the steps wrote). `stats`, if given, receives what
/// the scheduler did. Throws dice::InputError naming the request and option, before any
/// forward, when its mask_id or a stop id is outside [0, backend.vocab_rows());
/// dice::InputError naming the request when its cache could not fit even alone; and what the
/// backend or SequenceDecoder throws (the sequences are closed first).
std::vector<GenerationResult> generate(Backend& backend,
                                       std::span<const GenerationRequest> requests,
                                       const OutputCallback& on_output = {},
                                       const ScheduleOptions& schedule = {},
                                       ScheduleStats* stats = nullptr);

}  // namespace dice::engine
