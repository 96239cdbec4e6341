#pragma once
// Token ids given as text (options, stdin) by several subcommands.

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "dice/core/error.h"

namespace dice::cli {

/// Non-negative int32 ids separated by commas and/or whitespace. Throws dice::InputError naming
/// `what` (the option or stream) and the offending word.
inline std::vector<std::int32_t> parse_token_ids(std::string_view text, std::string_view what) {
  std::string spaced(text);
  for (char& c : spaced)
    if (c == ',') c = ' ';
  std::istringstream words(spaced);
  std::vector<std::int32_t> ids;
  std::string word;
  while (words >> word) {
    std::size_t used = 0;
    long long value = -1;
    try {
      value = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || value < 0 || value > std::numeric_limits<std::int32_t>::max())
      throw InputError(fmt::format("{}: \"{}\" is not a token id", what, word));
    ids.push_back(static_cast<std::int32_t>(value));
  }
  return ids;
}

}  // namespace dice::cli
