#include "dice/engine/backend.h"

#include <fmt/format.h>

#include "dice/core/error.h"

namespace dice::engine {

void propose_decided_rows(std::span<const ForwardItem> items, std::span<Proposal> proposals) {
  std::size_t block_rows = 0;
  for (const ForwardItem& item : items) block_rows += item.block.size();
  if (block_rows != proposals.size())
    throw Error(fmt::format("propose_decided_rows: {} proposals for {} block rows",
                            proposals.size(), block_rows));
  std::size_t row = 0;
  for (const ForwardItem& item : items)
    for (const std::int32_t token : item.block) proposals[row++] = Proposal{token, 1.0f, 0.0f};
}

}  // namespace dice::engine
