// `dice engine logits`: the engine's teacher-forced logits of a token sequence, for comparisons
// with reference implementations (engine/tests, bench/engine_cpu_vs_hf.py).

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "dice/core/error.h"
#include "dice/engine/cpu_backend.h"
#include "dice/engine/scoring.h"
#include "dice/model/checkpoint.h"
#include "token_ids.h"

namespace dice::cli {

namespace {

struct LogitsArgs {
  std::string model;
  std::string out;
  std::int64_t prompt_length = -1;
  std::int32_t block_length = 4;
  bool fused_store = true;
  int threads = 0;
};

void run_logits(const LogitsArgs& args) {
  const std::string text{std::istreambuf_iterator<char>(std::cin),
                         std::istreambuf_iterator<char>()};
  const auto ids = parse_token_ids(text, "stdin");
  if (ids.empty()) throw InputError("stdin: no token ids");
  const std::int64_t prompt = args.prompt_length < 0 ? std::ssize(ids) : args.prompt_length;
  std::unique_ptr<engine::CpuBackend> backend;
  {
    const auto checkpoint = model::Checkpoint::open(args.model);
    backend =
        std::make_unique<engine::CpuBackend>(engine::CpuWeights::from_checkpoint(checkpoint),
                                             engine::CpuBackendOptions{.threads = args.threads});
  }
  const auto scored =
      engine::score_blocks(*backend, ids, prompt, args.block_length, args.fused_store);
  std::ofstream file(args.out, std::ios::binary);
  if (!file) throw InputError(fmt::format("--out {}: cannot write", args.out));
  file.write(reinterpret_cast<const char*>(scored.logits.data()),
             static_cast<std::streamsize>(scored.logits.size() * sizeof(float)));
  if (!file) throw Error(fmt::format("--out {}: write failed", args.out));
  const nlohmann::json summary{{"first_position", scored.first_position},
                               {"rows", scored.rows},
                               {"vocab_rows", scored.vocab_rows},
                               {"forwards", scored.forwards},
                               {"dtype", "float32"},
                               {"out", args.out}};
  std::cout << summary.dump() << "\n";
}

}  // namespace

void add_engine_command(CLI::App& app) {
  auto* engine = app.add_subcommand("engine", "engine tools (for tests and comparisons)");
  engine->require_subcommand(1);
  auto args = std::make_shared<LogitsArgs>();
  auto* logits = engine->add_subcommand(
      "logits",
      "teacher-forced logits of the token ids on stdin, block by block as decoding computes them; "
      "rows from floor(P/B)*B on, written to --out as raw little-endian float32 [rows, vocab]");
  logits->add_option("--model", args->model, "model folder")->required();
  logits->add_option("--out", args->out, "file for the logits")->required();
  logits->add_option("--prompt-length", args->prompt_length,
                     "P: the first floor(P/B)*B ids are prefilled (default: all ids)");
  logits->add_option("--block-length", args->block_length, "B")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  logits->add_flag("!--no-fused-store", args->fused_store, "commit each block in its own forward");
  logits->add_option("--threads", args->threads, "CPU threads (0: every core)")
      ->capture_default_str();
  logits->callback([args] { run_logits(*args); });
}

}  // namespace dice::cli
