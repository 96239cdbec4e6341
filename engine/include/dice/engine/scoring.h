#pragma once
// Logits of a known token sequence computed block by block exactly as decoding computes them
// (teacher forcing): the path tests compare with a full-sequence reference forward.

#include <cstdint>
#include <span>
#include <vector>

#include "dice/engine/backend.h"

namespace dice::engine {

/// Logit rows [first_position, first_position + rows) of a sequence.
struct ScoredLogits {
  std::int64_t first_position = 0;
  std::int64_t rows = 0;
  std::int64_t vocab_rows = 0;
  std::vector<float> logits;  ///< [rows, vocab_rows] row-major, fp32
  std::int64_t forwards = 0;
};

/// Runs `ids` (a prompt of `prompt_length` tokens followed by any continuation) through `backend`
/// the way decoding does: floor(P/B)*B prompt tokens are prefilled; from there each block of B
/// tokens (the last one possibly shorter) is forwarded as the block being denoised and its logits
/// kept, then committed, by the next block's forward when `fused_store` (the prefill rides with
/// the first block too) or by a commit-only forward otherwise. Row i of the result predicts token
/// first_position + i (not shifted). Uses sequence id `sequence` (opened and closed here).
/// Throws dice::InputError if prompt_length > ids.size() or block_length < 1, and what the backend
/// throws.
ScoredLogits score_blocks(Backend& backend, std::span<const std::int32_t> ids,
                          std::int64_t prompt_length, std::int32_t block_length, bool fused_store,
                          SequenceId sequence = 0);

}  // namespace dice::engine
