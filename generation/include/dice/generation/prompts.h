#pragma once
// The prompts of `dice bench`, kept as editable data files (generation/prompts/): the KernelBench
// one-shot prompt (end-to-end mode) and the kernel-infilling prompt of BiC-RL stage 1 (system.md
// §5: prefix and suffix given, the model writes the CUDA source in between).

#include <filesystem>
#include <string>
#include <string_view>

namespace dice::generation {

/// generation/prompts/ of the source tree this binary was built from.
std::filesystem::path default_prompt_dir();

/// The one-shot prompt for a KernelBench-format problem: `template_file` with every `{problem}`
/// replaced by `problem_code`. Throws dice::InputError naming the file if it cannot be read or
/// lacks the placeholder.
std::string render_oneshot_prompt(const std::filesystem::path& template_file,
                                  std::string_view problem_code);

/// The infilling prompt: `template_file` with `{problem}`, `{prefix}` and `{suffix}` replaced
/// (each placeholder replaced once, in one pass, so text inside the values is never rescanned).
/// Throws dice::InputError naming the file if it cannot be read or lacks one of the placeholders.
std::string render_infill_prompt(const std::filesystem::path& template_file,
                                 std::string_view problem_code, std::string_view prefix,
                                 std::string_view suffix);

}  // namespace dice::generation
