#pragma once
// What a generation asks for and what it returns: decoding options, the decoding trace, stop
// reason and counts (system.md §2, decoding; §5, the trace TraceRL replays).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dice/engine/remasking.h"
#include "dice/engine/sampling.h"

namespace dice::engine {

/// Stop ids of SDAR/DICE models: <|im_end|> and <|endoftext|> (system.md §2).
inline constexpr std::int32_t kImEndId = 151645;
inline constexpr std::int32_t kEndOfTextId = 151643;

/// Options of one block-diffusion generation (system.md §2). Defaults are the paper's evaluation
/// setting: block 4, 4 denoising steps per block, greedy, up to 4096 new tokens.
struct GenerationOptions {
  std::int32_t block_length = 4;       ///< B: tokens per block, the unit of the block-causal mask
  std::int32_t steps = 4;              ///< at most this many denoising steps per block
  RemaskingOptions remasking;          ///< which masked positions a step unmasks
  SamplingParams sampling;             ///< temperature/top-k/top-p, seed, forbidden ids
  std::int64_t max_new_tokens = 4096;  ///< token limit of the output (stop id included)
  std::vector<std::int32_t> stop_ids{kImEndId, kEndOfTextId};  ///< output ends at the first one
  /// Fuse the store pass of a finished block with the first denoising step of the next block (and
  /// the prompt prefill with the first step of the first block): one forward instead of two,
  /// exact because block b never attends to block b+1 (system.md §2 step 3).
  bool fused_store = true;

  /// Throws dice::InputError naming the option when a value is out of range (block_length < 1,
  /// steps < 1, max_new_tokens < 0, threshold outside [0, 1], entropy bound <= 0, temperature < 0,
  /// top-k < 0, top-p outside (0, 1], vocab_limit < 1, mask id < 0).
  void validate() const;
};

/// When one generated token was unmasked (the decoding trace, system.md §5).
struct TokenTrace {
  std::int64_t block = 0;    ///< absolute block index: position / block_length
  std::int32_t step = 0;     ///< denoising step within its block, 0-based
  std::int64_t forward = 0;  ///< index of the sequence's forward that proposed it, 0-based
};

/// Why a generation ended.
enum class StopReason {
  kStopId,  ///< a stop id was generated (it is the last output token)
  kLength,  ///< max_new_tokens reached
};
/// "stop" or "length".
std::string_view stop_reason_name(StopReason reason);

/// Work done by one generation.
struct GenerationCounts {
  std::int64_t forwards = 0;          ///< forwards this sequence took part in (fused count once)
  std::int64_t denoising_steps = 0;   ///< forwards that denoised a block of this sequence
  std::int64_t store_passes = 0;      ///< forwards that only committed (prefill or store pass)
  std::int64_t blocks = 0;            ///< blocks denoised (the last one possibly cut short)
  std::int64_t committed_tokens = 0;  ///< tokens first written to the KV cache (prefill too)
  std::int64_t prefill_tokens = 0;    ///< floor(P/B)*B
  /// Times the scheduler dropped this sequence's KV cache to make room (CacheAdmission::
  /// kGrowAndPreempt); each drop is recomputed by a prefill when the sequence rejoins.
  std::int64_t preemptions = 0;
  /// Tokens written to the KV cache again after a preemption (not in committed_tokens).
  std::int64_t recomputed_tokens = 0;
};

/// The result of one generation.
struct GenerationResult {
  std::vector<std::int32_t> prompt_ids;
  /// Generated tokens in order; ends with the stop id when stop_reason is kStopId.
  std::vector<std::int32_t> output_ids;
  std::vector<TokenTrace> trace;  ///< one entry per output token
  StopReason stop_reason = StopReason::kLength;
  GenerationCounts counts;
  double seconds = 0;  ///< wall time from the first forward to the end of this sequence
};

}  // namespace dice::engine
