#pragma once
// Prompts for kernel generation, kept as editable data files (engine/prompts/).

#include <filesystem>
#include <string>
#include <string_view>

namespace dice::engine {

/// The placeholder a prompt template must contain; it is replaced by the problem's code.
inline constexpr std::string_view kProblemPlaceholder = "{problem}";

/// The one-shot prompt for a KernelBench-format problem: the template file's text with every
/// `{problem}` replaced by `problem_code` (the Python source defining Model, get_inputs and
/// get_init_inputs). Throws dice::InputError naming the file if it cannot be read or has no
/// placeholder.
std::string render_problem_prompt(const std::filesystem::path& template_file,
                                  std::string_view problem_code);

}  // namespace dice::engine
