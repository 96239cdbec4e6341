// dice: generate fast CUDA kernels with diffusion language models. Thin entry point: parses the
// command line and turns errors into messages and exit codes.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "commands.h"
#include "dice/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"dice: generate, verify and time CUDA kernels with diffusion language models"};
  app.require_subcommand(1);
  dice::cli::add_eval_command(app);
  dice::cli::add_model_command(app);
  dice::cli::add_tokenize_command(app);
  dice::cli::add_generate_command(app);
  dice::cli::add_engine_command(app);
  dice::cli::add_bench_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints its message (or the help: code 0). A refusal of the command line is bad input
    // like any other: exit status 2, not CLI11's own 1xx codes.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const dice::cli::Interrupted& e) {
    fmt::print(stderr, "dice: {}\n", e.what());
    return 128 + e.signal();
  } catch (const dice::InputError& e) {
    fmt::print(stderr, "dice: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "dice: internal error: {}\n", e.what());
    return 1;
  }
  return 0;
}
