#pragma once
// The character classes of the Qwen2 pre-tokenizer pattern (\p{L}, \p{N}, \s), as Hugging Face
// tokenizers' Oniguruma has them (Unicode 16.0; see tools/gen_unicode_classes.py).

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace dice::tokenizer::detail {

/// Class of a code point for the pre-tokenizer.
enum class CharClass : std::uint8_t {
  kOther = 0,   ///< neither letter, number nor white space
  kLetter = 1,  ///< General_Category L (Lu, Ll, Lt, Lm, Lo)
  kNumber = 2,  ///< General_Category N (Nd, Nl, No)
  kSpace = 3,   ///< White_Space (includes \r and \n)
};

/// Code point -> CharClass, in a two-stage table (256-code-point blocks, identical blocks shared).
class CharClasses {
 public:
  CharClasses();
  CharClass of(char32_t cp) const {
    if (cp < 0x80) return ascii_[cp];
    if (cp >= 0x110000) return CharClass::kOther;
    return blocks_[static_cast<std::size_t>(stage1_[cp >> 8]) * 256 + (cp & 0xFF)];
  }

 private:
  std::array<CharClass, 128> ascii_{};
  std::vector<std::uint16_t> stage1_;
  std::vector<CharClass> blocks_;
};

/// The code point at byte `i` of valid UTF-8 `text`; its length goes to `length`.
inline char32_t decode_utf8_at(std::string_view text, std::size_t i, std::size_t& length) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  if (b0 < 0x80) {
    length = 1;
    return b0;
  }
  const auto cont = [&](std::size_t k) {
    return static_cast<char32_t>(static_cast<unsigned char>(text[i + k]) & 0x3F);
  };
  if (b0 < 0xE0) {
    length = 2;
    return (static_cast<char32_t>(b0 & 0x1F) << 6) | cont(1);
  }
  if (b0 < 0xF0) {
    length = 3;
    return (static_cast<char32_t>(b0 & 0x0F) << 12) | (cont(1) << 6) | cont(2);
  }
  length = 4;
  return (static_cast<char32_t>(b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
}

}  // namespace dice::tokenizer::detail
