#pragma once
// Decoding choices given as text by `dice generate` and `dice bench`.

#include <fmt/format.h>

#include <string>

#include "dice/core/error.h"
#include "dice/engine/remasking.h"

namespace dice::cli {

/// The remasking strategy named by --strategy (system.md §2). Throws dice::InputError naming the
/// option and listing the valid names.
inline engine::RemaskingStrategy strategy_option(const std::string& name) {
  const auto strategy = engine::parse_strategy(name);
  if (!strategy)
    throw InputError(fmt::format(
        "--strategy {}: expected sequential, low_confidence_static, low_confidence_dynamic or "
        "entropy_bounded",
        name));
  return *strategy;
}

}  // namespace dice::cli
