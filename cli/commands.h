#pragma once
// Subcommands of the `dice` program; each registers its options and its callback.

#include <CLI/CLI.hpp>
#include <memory>
#include <stdexcept>
#include <string>

namespace dice::eval {
struct EvalOptions;
}

namespace dice::cli {

/// A command stopped by SIGINT/SIGTERM after an orderly shutdown; main() exits 128 + signal.
class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(int signal)
      : std::runtime_error("interrupted by signal " + std::to_string(signal)), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

/// Adds `dice eval` to `app`.
void add_eval_command(CLI::App& app);
/// Adds `dice generate` (block-diffusion generation with an SDAR/DICE model) to `app`.
void add_generate_command(CLI::App& app);
/// Adds `dice engine logits` (teacher-forced logits of a token sequence) to `app`.
void add_engine_command(CLI::App& app);

/// Adds `dice eval serve` to the eval subcommand; it shares eval's options (cache, python, jobs,
/// devices, timeouts) through `options`.
void add_serve_command(CLI::App& eval, std::shared_ptr<eval::EvalOptions> options);

/// Adds `dice model` (`random`: random checkpoints; `inspect`: validate and list a model folder).
void add_model_command(CLI::App& app);

/// Adds `dice tokenize` to `app`.
void add_tokenize_command(CLI::App& app);

}  // namespace dice::cli
