#pragma once
// `dice tokenize`: JSON Lines in, JSON Lines out, one output line per input line.

#include <cstddef>
#include <iosfwd>
#include <optional>

#include "dice/tokenizer/tokenizer.h"

namespace dice::tokenizer {

/// What `dice tokenize` does with each record.
struct TokenizeOptions {
  enum class Mode {
    kEncode,  ///< {"text": str} -> {"ids": [int]}
    kDecode,  ///< {"ids": [int]} -> {"text": str}
    kChat,    ///< {"messages": [{role, content, reasoning_content?}]} -> {"text", "ids"}
    kPieces,  ///< {"text": str} -> {"pieces": [str]}: what the BPE model sees (Tokenizer::pieces)
  };
  Mode mode = Mode::kEncode;
  bool skip_special = false;            ///< decode: leave special tokens out
  bool add_generation_prompt = true;    ///< chat: end with the assistant header
  std::optional<bool> enable_thinking;  ///< chat: false appends an empty think block
};

/// Reads JSON Lines from `in` and writes one JSON line per input line to `out`, in order. The
/// other fields of each record (e.g. "id") are echoed before the result. A malformed line gives
/// {..., "error": "line N: what is wrong"} and the run goes on. Output is buffered and flushed
/// whenever the input has nothing more buffered (so a coprocess sees each answer). Returns the
/// number of error lines.
std::size_t tokenize_jsonl(const Tokenizer& tokenizer, std::istream& in, std::ostream& out,
                           const TokenizeOptions& options);

}  // namespace dice::tokenizer
