#include "utf8.h"

namespace dice::tokenizer::detail {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool in_range(unsigned char b, unsigned char lo, unsigned char hi) {
  return b >= lo && b <= hi;
}

}  // namespace

Utf8Step utf8_step(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  const unsigned char b0 = p[0];
  if (b0 < 0x80) return {Utf8Step::Kind::kChar, 1, b0};
  std::size_t need = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  char32_t cp = 0;
  if (in_range(b0, 0xC2, 0xDF)) {
    need = 1;
    cp = b0 & 0x1Fu;
  } else if (in_range(b0, 0xE0, 0xEF)) {
    need = 2;
    cp = b0 & 0x0Fu;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (in_range(b0, 0xF0, 0xF4)) {
    need = 3;
    cp = b0 & 0x07u;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {Utf8Step::Kind::kInvalid, 1, 0};
  }
  for (std::size_t i = 1; i <= need; ++i) {
    if (i >= n) return {Utf8Step::Kind::kTruncated, n, 0};
    const unsigned char b = p[i];
    // Only the second byte has a restricted range; the others are plain continuation bytes.
    const bool ok = i == 1 ? in_range(b, lo, hi) : in_range(b, 0x80, 0xBF);
    if (!ok) return {Utf8Step::Kind::kInvalid, i, 0};
    cp = (cp << 6) | (b & 0x3Fu);
  }
  return {Utf8Step::Kind::kChar, need + 1, cp};
}

std::size_t find_invalid_utf8(std::string_view text) {
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    // ASCII runs eight bytes at a time.
    while (i + 8 <= n) {
      std::uint64_t word = 0;
      for (std::size_t k = 0; k < 8; ++k)
        word |= static_cast<std::uint64_t>(static_cast<unsigned char>(text[i + k])) << (8 * k);
      if ((word & 0x8080808080808080ULL) != 0) break;
      i += 8;
    }
    if (i >= n) break;
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const Utf8Step step = utf8_step(text.substr(i));
    if (step.kind != Utf8Step::Kind::kChar) return i;
    i += step.length;
  }
  return std::string_view::npos;
}

void append_lossy_utf8(std::string& out, std::string_view bytes) {
  std::size_t i = 0;
  std::size_t run = 0;  // start of the pending run of valid bytes
  while (i < bytes.size()) {
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    const Utf8Step step = utf8_step(bytes.substr(i));
    if (step.kind == Utf8Step::Kind::kChar) {
      i += step.length;
      continue;
    }
    out.append(bytes.substr(run, i - run));
    out.append(kReplacement);
    i += step.length;
    run = i;
  }
  out.append(bytes.substr(run));
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::size_t settled_prefix_length(std::string_view bytes) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const Utf8Step step = utf8_step(bytes.substr(i));
    if (step.kind == Utf8Step::Kind::kTruncated) return i;
    i += step.length;
  }
  return i;
}

}  // namespace dice::tokenizer::detail
