// `dice tokenize`: options; the work is dice::tokenizer::tokenize_jsonl.

#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "dice/core/error.h"
#include "dice/tokenizer/jsonl.h"
#include "dice/tokenizer/tokenizer.h"

namespace dice::cli {

namespace {

struct TokenizeArgs {
  std::string model;
  bool decode = false;
  bool chat = false;
  bool pieces = false;
  bool skip_special = false;
  bool no_generation_prompt = false;
  std::string enable_thinking;
};

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* cmd = app.add_subcommand(
      "tokenize",
      "encode, decode or chat-template JSON Lines on stdin (one output line per input line)");
  cmd->add_option("-m,--model", args->model,
                  "model or tokenizer folder (tokenizer.json, or vocab.json + merges.txt)")
      ->required();
  cmd->add_flag("--decode", args->decode, R"({"ids": [...]} -> {"text": ...})");
  cmd->add_flag("--chat", args->chat,
                R"({"messages": [{"role", "content"}...]} -> {"text": ..., "ids": [...]})");
  cmd->add_flag("--pieces", args->pieces,
                R"({"text": ...} -> {"pieces": [...]}: the pre-tokenized pieces, for inspection)");
  cmd->add_flag("--skip-special", args->skip_special, "with --decode: leave special tokens out");
  cmd->add_flag("--no-generation-prompt", args->no_generation_prompt,
                "with --chat: do not end with the assistant header");
  cmd->add_option("--enable-thinking", args->enable_thinking,
                  "with --chat: true or false (false appends an empty think block)")
      ->check(CLI::IsMember({"true", "false"}));
  cmd->callback([args] {
    if (int{args->decode} + int{args->chat} + int{args->pieces} > 1)
      throw InputError("--decode, --chat and --pieces exclude each other");
    tokenizer::TokenizeOptions options;
    using Mode = tokenizer::TokenizeOptions::Mode;
    options.mode = args->decode   ? Mode::kDecode
                   : args->chat   ? Mode::kChat
                   : args->pieces ? Mode::kPieces
                                  : Mode::kEncode;
    options.skip_special = args->skip_special;
    options.add_generation_prompt = !args->no_generation_prompt;
    if (!args->enable_thinking.empty()) options.enable_thinking = args->enable_thinking == "true";
    const auto tok = tokenizer::Tokenizer::load(args->model);
    std::ios::sync_with_stdio(false);
    std::cin.tie(nullptr);
    tokenizer::tokenize_jsonl(tok, std::cin, std::cout, options);
  });
}

}  // namespace dice::cli
