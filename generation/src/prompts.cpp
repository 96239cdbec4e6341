#include "dice/generation/prompts.h"

#include <map>

#include "dice/core/error.h"
#include "dice/core/files.h"

namespace dice::generation {

namespace fs = std::filesystem;

fs::path default_prompt_dir() {
  return fs::path(DICE_SOURCE_DIR) / "generation" / "prompts";
}

namespace {

std::string read_template(const fs::path& file) {
  try {
    return read_file(file);
  } catch (const std::exception& e) {
    throw InputError("prompt template " + file.string() + ": " + e.what());
  }
}

/// Replaces every `{name}` of `values` in one left-to-right pass; throws if one never occurs.
std::string substitute(const fs::path& file, const std::string& text,
                       const std::map<std::string, std::string_view>& values) {
  std::map<std::string, bool> seen;
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    bool replaced = false;
    if (text[i] == '{') {
      for (const auto& [name, value] : values) {
        const std::string key = "{" + name + "}";
        if (text.compare(i, key.size(), key) == 0) {
          out += value;
          i += key.size();
          seen[name] = true;
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out += text[i++];
  }
  for (const auto& [name, value] : values)
    if (!seen[name])
      throw InputError("prompt template " + file.string() + " has no {" + name + "} placeholder");
  return out;
}

}  // namespace

std::string render_oneshot_prompt(const fs::path& template_file, std::string_view problem_code) {
  return substitute(template_file, read_template(template_file), {{"problem", problem_code}});
}

std::string render_infill_prompt(const fs::path& template_file, std::string_view problem_code,
                                 std::string_view prefix, std::string_view suffix) {
  return substitute(template_file, read_template(template_file),
                    {{"problem", problem_code}, {"prefix", prefix}, {"suffix", suffix}});
}

}  // namespace dice::generation
