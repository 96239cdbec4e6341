#pragma once
// Unicode NFC of the text between added tokens, with utf8proc (Hugging Face tokenizers' NFC
// normalizer; the differential sweep in bench/tokenizer_compare.py checks every code point).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dice::tokenizer::detail {

/// True when `text` (valid UTF-8) is certainly unchanged by NFC: every code point is below U+0300,
/// or is a starter without a canonical decomposition that never composes with what precedes it
/// (Unicode UAX #15 quick check, answered from utf8proc's tables). False means "maybe".
bool nfc_quick_check(std::string_view text);

/// Reusable buffers of nfc().
struct NfcScratch {
  std::vector<std::int32_t> code_points;
};

/// Writes the NFC of `text` (valid UTF-8) to `out` (replacing its contents).
void nfc(std::string_view text, std::string& out, NfcScratch& scratch);

}  // namespace dice::tokenizer::detail
