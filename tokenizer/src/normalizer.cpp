#include "normalizer.h"

#include <utf8proc.h>

#include <cstdint>

#include "dice/core/error.h"
#include "utf8.h"

namespace dice::tokenizer::detail {

namespace {

// utf8proc marks code points that can be the second half of a canonical composition with a
// comb_index of 0x8000 or more (utf8proc.c, utf8proc_normalize_utf32).
constexpr std::uint16_t kSecondOfPair = 0x8000;

bool nfc_stable(char32_t cp) {
  if (cp < 0x300) return true;
  if (cp >= 0x1100 && cp <= 0x11FF) return false;  // Hangul jamo compose algorithmically
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
                                  static_cast<utf8proc_ssize_t>(cps.size()), options, nullptr,
                                  nullptr);
    if (n < 0) throw Error(std::string("NFC normalization failed: ") + utf8proc_errmsg(n));
    if (static_cast<std::size_t>(n) <= cps.size()) break;
    cps.resize(static_cast<std::size_t>(n));
  }
  n = utf8proc_normalize_utf32(cps.data(), n, options);
  if (n < 0) throw Error(std::string("NFC normalization failed: ") + utf8proc_errmsg(n));
  out.reserve(text.size() + 16);
  for (utf8proc_ssize_t i = 0; i < n; ++i)
    append_utf8(out, static_cast<char32_t>(cps[static_cast<std::size_t>(i)]));
}

}  // namespace dice::tokenizer::detail
