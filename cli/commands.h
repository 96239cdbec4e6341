#pragma once
// Subcommands of the `dice` program; each registers its options and its callback.

#include <CLI/CLI.hpp>

namespace dice::cli {

/// Adds `dice eval` to `app`.
void add_eval_command(CLI::App& app);
/// Adds `dice generate` (block-diffusion generation with an SDAR/DICE model) to `app`.
void add_generate_command(CLI::App& app);
/// Adds `dice engine logits` (teacher-forced logits of a token sequence) to `app`.
void add_engine_command(CLI::App& app);

/// Adds `dice model` (`random`: random checkpoints; `inspect`: validate and list a model folder).
void add_model_command(CLI::App& app);

/// Adds `dice tokenize` to `app`.
void add_tokenize_command(CLI::App& app);

}  // namespace dice::cli
