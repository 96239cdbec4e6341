#include "dice/engine/scoring.h"

#include <fmt/format.h>

#include <algorithm>

#include "dice/core/error.h"

namespace dice::engine {

ScoredLogits score_blocks(Backend& backend, std::span<const std::int32_t> ids,
                          std::int64_t prompt_length, std::int32_t block_length, bool fused_store,
                          SequenceId sequence) {
  if (block_length < 1) throw InputError(fmt::format("scoring: block length {} < 1", block_length));
  if (prompt_length < 0 || prompt_length > std::ssize(ids))
    throw InputError(
        fmt::format("scoring: prompt length {} outside [0, {}]", prompt_length, ids.size()));
  const std::int64_t b = block_length, n = std::ssize(ids);
  ScoredLogits result;
  result.first_position = prompt_length / b * b;
  result.rows = n - result.first_position;
  result.vocab_rows = backend.vocab_rows();
  result.logits.reserve(static_cast<std::size_t>(result.rows * result.vocab_rows));

  backend.open(sequence, block_length);
  try {
    ForwardOutput out;
    const ForwardRequest request{.proposals = false, .logits = true};
    std::int64_t committed = 0, pending = result.first_position;  // commit [committed, pending)
    const auto run = [&](std::int64_t block_start, std::int64_t block_end) {
      ForwardItem item;
      item.sequence = sequence;
      item.commit = ids.subspan(static_cast<std::size_t>(committed),
                                static_cast<std::size_t>(pending - committed));
      item.block = ids.subspan(static_cast<std::size_t>(block_start),
                               static_cast<std::size_t>(block_end - block_start));
      backend.forward(std::span<const ForwardItem>(&item, 1), request, out);
      ++result.forwards;
      committed = pending;
      result.logits.insert(result.logits.end(), out.logits.begin(), out.logits.end());
    };
    for (std::int64_t start = result.first_position; start < n; start += b) {
      if (!fused_store && pending > committed) run(start, start);  // store pass alone
      run(start, std::min(n, start + b));
      pending = std::min(n, start + b);
      if (pending - start < b) break;  // a partial last block is never committed
    }
    if (result.rows == 0 && pending > committed) run(pending, pending);  // prefill only
  } catch (...) {
    backend.close(sequence);
    throw;
  }
  backend.close(sequence);
  return result;
}

}  // namespace dice::engine
