// `dice model`: random checkpoints and inspection of model folders; the work is dice::model.

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "commands.h"
#include "defaults.h"
#include "dice/core/error.h"
#include "dice/model/checkpoint.h"
#include "dice/model/inspect.h"
#include "dice/model/random_checkpoint.h"

namespace dice::cli {

namespace fs = std::filesystem;

namespace {

struct RandomArgs {
  std::string config = "tiny";
  std::string out;
  std::string dtype = "bf16";
  std::uint64_t seed = 0;
  std::optional<std::int64_t> layers;
  std::optional<std::int64_t> vocab;
  bool tie = false;
  std::string tokenizer;
  bool no_tokenizer = false;
  model::RandomCheckpointOptions options;
};

struct InspectArgs {
  std::string dir;
  bool json = false;
  std::string dump;
};

model::DType parse_dtype(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return model::DType::kBF16;
  if (s == "f16" || s == "fp16" || s == "float16") return model::DType::kF16;
  if (s == "f32" || s == "fp32" || s == "float32") return model::DType::kF32;
  throw InputError("--dtype " + s + ": expected bf16, f16 or f32");
}

void run_random(const RandomArgs& args) {
  model::ModelConfig config = model::config_preset(args.config);
  if (args.layers) config.num_layers = *args.layers;
  if (args.vocab) {
    config.vocab_size = *args.vocab;
    if (config.mask_token_id >= config.vocab_size) {
      config.mask_token_id = static_cast<std::int32_t>(config.vocab_size - 1);
      fmt::print(stderr, "dice model random: mask_token_id set to {} (the last id of --vocab)\n",
                 config.mask_token_id);
    }
  }
  if (args.tie) config.tie_word_embeddings = true;
  model::RandomCheckpointOptions options = args.options;
  if (!args.no_tokenizer && !args.tokenizer.empty()) options.tokenizer_dir = args.tokenizer;
  const auto start = std::chrono::steady_clock::now();
  const model::RandomCheckpointResult result =
      model::write_random_checkpoint(args.out, config, parse_dtype(args.dtype), args.seed, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("{}: {} tensors, {} bytes ({:.2f} GB) in {} file(s), {} tokenizer file(s), {:.1f} s\n",
             args.out, result.num_tensors, result.tensor_bytes,
             static_cast<double>(result.tensor_bytes) / 1e9, result.weight_files.size(),
             result.copied_files.size(), seconds);
}

void run_inspect(const InspectArgs& args) {
  const model::Checkpoint checkpoint = model::Checkpoint::open(args.dir);
  if (!args.dump.empty()) {
    const std::vector<float> values = checkpoint.tensor(args.dump).to_f32();
    std::string text;
    for (const float v : values) {
      text += fmt::format("{:.9g}\n", v);
      if (text.size() > (1u << 20)) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        text.clear();
      }
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  if (args.json)
    std::cout << model::describe_json(checkpoint).dump(2) << "\n";
  else
    std::cout << model::describe_text(checkpoint);
}

}  // namespace

void add_model_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("model", "random checkpoints and model folder inspection");
  cmd->require_subcommand(1);

  auto random = std::make_shared<RandomArgs>();
  auto* r = cmd->add_subcommand(
      "random", "write a model folder with random weights (config.json, safetensors, tokenizer)");
  r->add_option("--config", random->config, "tiny, a config.json, or a model folder holding one")
      ->capture_default_str();
  r->add_option("-o,--out", random->out, "model folder to write")->required();
  r->add_option("--dtype", random->dtype, "bf16, f16 or f32")->capture_default_str();
  r->add_option("--seed", random->seed, "random seed (same seed, same weights)")
      ->capture_default_str();
  r->add_option("--init-std", random->options.init_std, "std of every matrix: normal(0, std)")
      ->capture_default_str();
  r->add_option("--norm-noise", random->options.norm_noise_std,
                "RMSNorm weights are 1 + normal(0, this)")
      ->capture_default_str();
  r->add_option("--layers", random->layers, "override num_hidden_layers");
  r->add_option("--vocab", random->vocab, "override vocab_size");
  r->add_flag("--tie", random->tie, "tie_word_embeddings (no lm_head.weight)");
  r->add_option("--max-shard-bytes", random->options.max_shard_bytes,
                "largest shard (5GB = 5e9 bytes; kb = 1000, kib = 1024)")
      ->transform(CLI::AsSizeValue(true))
      ->capture_default_str();
  if (fs::is_directory(shared_tokenizer())) random->tokenizer = shared_tokenizer().string();
  r->add_option("--tokenizer", random->tokenizer, "folder whose tokenizer files are copied in")
      ->capture_default_str();
  r->add_flag("--no-tokenizer", random->no_tokenizer, "copy no tokenizer files");
  r->add_option("--threads", random->options.threads, "generator threads (0: one per core)")
      ->capture_default_str();
  r->add_flag("--force", random->options.overwrite,
              "replace the weights and config.json of an existing folder");
  r->callback([random] { run_random(*random); });

  auto inspect = std::make_shared<InspectArgs>();
  auto* i = cmd->add_subcommand("inspect", "validate a model folder and list its tensors");
  i->add_option("dir", inspect->dir, "model folder (config.json + safetensors)")->required();
  i->add_flag("--json", inspect->json, "machine-readable output");
  i->add_option("--dump", inspect->dump,
                "print the values of this tensor as fp32, one per line (%.9g), nothing else");
  i->callback([inspect] { run_inspect(*inspect); });
}

}  // namespace dice::cli
