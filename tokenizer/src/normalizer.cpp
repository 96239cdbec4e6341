#include "normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "dice/core/error.h"
#include "utf8.h"

namespace dice::tokenizer::detail {

namespace {

// utf8proc marks code points that can be the second half of a canonical composition with a
// comb_index of 0x8000 or more (utf8proc.c, utf8proc_normalize_utf32).
constexpr std::uint16_t kSecondOfPair = 0x8000;

// Code points that carry NFC properties in utf8proc 2.8 (Unicode 15.0: a combining class, or a
// canonical composition) but that Hugging Face tokenizers' NFC (crate unicode-normalization-
// alignments, Unicode 9.0 tables) does not know, so it treats them as unassigned: inert starters.
// Found by probing tokenizers' NFC normalizer with each of utf8proc's 3003 code points that have a
// combining class or a canonical decomposition (combining marks of Unicode 10-15, and the Dives
// Akuru vowel sign O U+11938 = U+11935 U+11930); bench/tokenizer_compare.py's sweep over every
// code point checks the result. Sorted.
constexpr std::array<char32_t, 110> kUnknownToHf = {
    0x7FD,   0x898,   0x899,   0x89A,   0x89B,   0x89C,   0x89D,   0x89E,   0x89F,   0x8CA,
    0x8CB,   0x8CC,   0x8CD,   0x8CE,   0x8CF,   0x8D0,   0x8D1,   0x8D2,   0x8D3,   0x9FE,
    0xC3C,   0xD3B,   0xD3C,   0xEBA,   0x1715,  0x1ABF,  0x1AC0,  0x1AC1,  0x1AC2,  0x1AC3,
    0x1AC4,  0x1AC5,  0x1AC6,  0x1AC7,  0x1AC8,  0x1AC9,  0x1ACA,  0x1ACB,  0x1ACC,  0x1ACD,
    0x1ACE,  0x1DF6,  0x1DF7,  0x1DF8,  0x1DF9,  0x1DFA,  0xA82C,  0x10D24, 0x10D25, 0x10D26,
    0x10D27, 0x10EAB, 0x10EAC, 0x10EFD, 0x10EFE, 0x10EFF, 0x10F46, 0x10F47, 0x10F48, 0x10F49,
    0x10F4A, 0x10F4B, 0x10F4C, 0x10F4D, 0x10F4E, 0x10F4F, 0x10F50, 0x10F82, 0x10F83, 0x10F84,
    0x10F85, 0x11070, 0x1133B, 0x1145E, 0x11839, 0x1183A, 0x11930, 0x11938, 0x1193D, 0x1193E,
    0x11943, 0x119E0, 0x11A34, 0x11A47, 0x11A99, 0x11D42, 0x11D44, 0x11D45, 0x11D97, 0x11F41,
    0x11F42, 0x16FF0, 0x16FF1, 0x1E08F, 0x1E130, 0x1E131, 0x1E132, 0x1E133, 0x1E134, 0x1E135,
    0x1E136, 0x1E2AE, 0x1E2EC, 0x1E2ED, 0x1E2EE, 0x1E2EF, 0x1E4EC, 0x1E4ED, 0x1E4EE, 0x1E4EF};

// While utf8proc normalizes, each of those stands in as a surrogate code point (never in valid
// input, and inert for utf8proc), and is put back afterwards.
constexpr char32_t kStandIn = 0xD800;

std::int32_t unknown_index(char32_t cp) {
  const auto it = std::lower_bound(kUnknownToHf.begin(), kUnknownToHf.end(), cp);
  return it != kUnknownToHf.end() && *it == cp
             ? static_cast<std::int32_t>(it - kUnknownToHf.begin())
             : -1;
}

utf8proc_int32_t stand_in(utf8proc_int32_t cp, void* /*unused*/) {
  if (cp < 0x7FD) return cp;
  const std::int32_t i = unknown_index(static_cast<char32_t>(cp));
  return i < 0 ? cp : static_cast<utf8proc_int32_t>(kStandIn) + i;
}

bool nfc_stable(char32_t cp) {
  if (cp < 0x300) return true;
  if (cp >= 0x1100 && cp <= 0x11FF) return false;  // Hangul jamo compose algorithmically
  if (unknown_index(cp) >= 0) return true;
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  if (p->combining_class != 0) return false;
  if (p->decomp_seqindex != UINT16_MAX && p->decomp_type == 0) return false;  // canonical
  if (p->comb_index != UINT16_MAX && p->comb_index >= kSecondOfPair) return false;
  return true;
}

}  // namespace

bool nfc_quick_check(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0xCC) {  // lead bytes below 0xCC start code points below U+0300
      ++i;
      continue;
    }
    const Utf8Step step = utf8_step(text.substr(i));
    if (step.kind != Utf8Step::Kind::kChar || !nfc_stable(step.code_point)) return false;
    i += step.length;
  }
  return true;
}

void nfc(std::string_view text, std::string& out, NfcScratch& scratch) {
  out.clear();
  auto& cps = scratch.code_points;
  if (cps.size() < text.size() + 8) cps.resize(text.size() + 8);
  const auto options = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  utf8proc_ssize_t n = 0;
  for (;;) {
    n = utf8proc_decompose_custom(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                  static_cast<utf8proc_ssize_t>(text.size()), cps.data(),
                                  static_cast<utf8proc_ssize_t>(cps.size()), options, stand_in,
                                  nullptr);
    if (n < 0) throw Error(std::string("NFC normalization failed: ") + utf8proc_errmsg(n));
    if (static_cast<std::size_t>(n) <= cps.size()) break;
    cps.resize(static_cast<std::size_t>(n));
  }
  n = utf8proc_normalize_utf32(cps.data(), n, options);
  if (n < 0) throw Error(std::string("NFC normalization failed: ") + utf8proc_errmsg(n));
  out.reserve(text.size() + 16);
  for (utf8proc_ssize_t i = 0; i < n; ++i) {
    auto cp = static_cast<char32_t>(cps[static_cast<std::size_t>(i)]);
    if (cp >= kStandIn && cp < kStandIn + kUnknownToHf.size()) cp = kUnknownToHf[cp - kStandIn];
    append_utf8(out, cp);
  }
}

}  // namespace dice::tokenizer::detail
