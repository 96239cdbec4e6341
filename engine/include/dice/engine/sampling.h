#pragma once
// Token proposals of a denoising step: temperature / top-k / top-p sampling with counter-based
// randomness, the confidence and the entropy the remasking strategies rank by (system.md §2).
//
// The exact procedure (any backend must reproduce it; engine/tests/reference_decoder.py does):
//   allowed ids: 0 <= id < vocab_limit, id != mask_id (padding rows and the mask never emitted).
//   temperature == 0 (greedy): x0 = argmax of the allowed logits, lowest id on ties.
//   temperature > 0: w_i = exp((l_i - max l) / T) over allowed ids, in double precision.
//     top-k (k > 0): keep the k ids of largest logit (ties: lower id first).
//     top-p (p < 1): among the kept ids in that order, keep the shortest prefix whose w sum is
//       >= p * (sum of kept w); at least one id.
//     u = philox_uniform(seed, position, step); walk the kept ids in ascending id order
//       accumulating w (double); x0 = the first id whose running sum exceeds u * (sum of kept w)
//       (the last kept id if rounding leaves none).
//   confidence = softmax(l)[x0] over the allowed ids at temperature 1, no top-k/top-p (the
//     "unfiltered softmax" of system.md §2; temperature deliberately not applied, so that
//     thresholds mean the same at any temperature);
//   entropy = -sum p log p of that same distribution (nats).

#include <array>
#include <cstdint>
#include <span>

namespace dice::engine {

/// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3",
/// SC 2011): 4 x 32-bit counter, 2 x 32-bit key, 10 rounds. Matches Random123's known answers.
std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                           std::array<std::uint32_t, 2> key);

/// The uniform in [0, 1) that drives sampling at absolute `position` of a sequence in denoising
/// `step` (0-based, within its block): Philox4x32-10 with key = (seed low 32 bits, seed high 32
/// bits) and counter = (position low 32 bits, position high 32 bits, step, 0); u = out[0] / 2^32.
/// Depends on nothing else, so results do not depend on batching, fusion or the backend; several
/// samples of one prompt (an RL group) take different seeds.
double philox_uniform(std::uint64_t seed, std::int64_t position, std::int32_t step);

/// How tokens are drawn from a logit row.
struct SamplingParams {
  double temperature = 0;             ///< 0: greedy argmax; > 0: sample from softmax(logits / T)
  std::int32_t top_k = 0;             ///< 0: off; else keep the k most likely ids
  double top_p = 1;                   ///< 1: off; else nucleus sampling with this mass, in (0, 1]
  std::uint64_t seed = 0;             ///< key of the counter-based RNG
  std::int32_t mask_id = 151669;      ///< never proposed
  std::int32_t vocab_limit = 151670;  ///< ids >= this (padding rows) never proposed
};

/// What a denoising step proposes for one position of the block.
struct Proposal {
  std::int32_t token = 0;
  float confidence = 0;  ///< probability of `token` under the temperature-1 unfiltered softmax
  float entropy = 0;     ///< entropy (nats) of that distribution
};

/// Proposes a token for one logit row (fp32, one entry per vocabulary row; rows >= vocab_limit
/// are ignored) at absolute `position` in denoising `step`, by the procedure at the top of this
/// file. Throws dice::Error if no id is allowed (vocab_limit too small for the row).
Proposal propose(std::span<const float> logits, const SamplingParams& params, std::int64_t position,
                 std::int32_t step);

}  // namespace dice::engine
