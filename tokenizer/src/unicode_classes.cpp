#include "unicode_classes.h"

#include <map>

namespace dice::tokenizer::detail {

namespace {

struct Range {
  char32_t first;
  char32_t last;
  CharClass cls;
};

constexpr Range kRanges[] = {
#include "unicode_classes.inc"
};

}  // namespace

CharClasses::CharClasses() {
  std::vector<CharClass> all(0x110000, CharClass::kOther);
  for (const Range& r : kRanges)
    for (char32_t cp = r.first; cp <= r.last; ++cp) all[cp] = r.cls;
  for (std::size_t cp = 0; cp < 128; ++cp) ascii_[cp] = all[cp];
  std::map<std::vector<CharClass>, std::uint16_t> seen;
  stage1_.resize(0x110000 / 256);
  for (std::size_t block = 0; block < stage1_.size(); ++block) {
    std::vector<CharClass> content(all.begin() + static_cast<std::ptrdiff_t>(block * 256),
                                   all.begin() + static_cast<std::ptrdiff_t>(block * 256 + 256));
    const auto [it, inserted] =
        seen.emplace(std::move(content), static_cast<std::uint16_t>(seen.size()));
    if (inserted) blocks_.insert(blocks_.end(), it->first.begin(), it->first.end());
    stage1_[block] = it->second;
  }
}

}  // namespace dice::tokenizer::detail
