#include "dice/engine/prompt.h"

#include <fmt/format.h>

#include "dice/core/error.h"
#include "dice/core/files.h"

namespace dice::engine {

std::string render_problem_prompt(const std::filesystem::path& template_file,
                                  std::string_view problem_code) {
  const std::string text = read_file(template_file);
  if (text.find(kProblemPlaceholder) == std::string::npos)
    throw InputError(fmt::format("prompt template {} has no {} placeholder", template_file.string(),
                                 kProblemPlaceholder));
  std::string out;
  std::size_t start = 0;
  while (true) {
    const auto at = text.find(kProblemPlaceholder, start);
    if (at == std::string::npos) break;
    out.append(text, start, at - start);
    out.append(problem_code);
    start = at + kProblemPlaceholder.size();
  }
  out.append(text, start);
  return out;
}

}  // namespace dice::engine
