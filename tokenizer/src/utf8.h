#pragma once
// UTF-8 helpers of the tokenizer: validation, lossy conversion (Rust's String::from_utf8_lossy, as
// Hugging Face tokenizers' decoders use it) and encoding of code points.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dice::tokenizer::detail {

/// What the bytes at the front of a buffer are, per the Unicode Standard, table 3-7 (well-formed
/// UTF-8 byte sequences).
struct Utf8Step {
  enum class Kind {
    kChar,       ///< a well-formed character of `length` bytes (1-4), code point `code_point`
    kInvalid,    ///< an ill-formed maximal subpart of `length` bytes (>= 1): one U+FFFD
    kTruncated,  ///< all `length` remaining bytes are a valid but incomplete prefix
  };
  Kind kind;
  std::size_t length;
  char32_t code_point;
};

/// Classifies the bytes at the front of `bytes` (non-empty).
Utf8Step utf8_step(std::string_view bytes);

/// Byte offset of the first ill-formed or incomplete sequence in `text`, or npos if it is valid.
std::size_t find_invalid_utf8(std::string_view text);

/// Appends `bytes` to `out`, each ill-formed maximal subpart (and an incomplete tail) replaced by
/// U+FFFD: exactly Rust's String::from_utf8_lossy (Unicode "substitution of maximal subparts").
void append_lossy_utf8(std::string& out, std::string_view bytes);

/// Appends the UTF-8 encoding of the code point `cp` (<= U+10FFFF, not a surrogate).
void append_utf8(std::string& out, char32_t cp);

/// Length of the longest prefix of `bytes` that ends at a boundary where from_utf8_lossy output is
/// final: everything except a trailing valid-but-incomplete sequence.
std::size_t settled_prefix_length(std::string_view bytes);

}  // namespace dice::tokenizer::detail
