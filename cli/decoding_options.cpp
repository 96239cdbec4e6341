#include "decoding_options.h"

#include "token_ids.h"

namespace dice::cli {

using nlohmann::json;

json DecodingArgs::to_json() const {
  return {{"max_active", max_active},
          {"reserve_whole_cache", reserve_whole_cache},
          {"block_length", options.block_length},
          {"steps", options.steps},
          {"strategy", strategy},
          {"threshold", options.remasking.threshold},
          {"entropy_bound", options.remasking.entropy_bound},
          {"temperature", options.sampling.temperature},
          {"top_k", options.sampling.top_k},
          {"top_p", options.sampling.top_p},
          {"max_new_tokens", options.max_new_tokens},
          {"stop_ids", stop_ids},
          {"vocab_limit", vocab_limit},
          {"fused_store", options.fused_store},
          {"chat_template", !no_chat_template},
          {"enable_thinking", enable_thinking}};
}

void DecodingArgs::from_json(const json& j) {
  max_active = j.value("max_active", max_active);
  reserve_whole_cache = j.value("reserve_whole_cache", reserve_whole_cache);
  options.block_length = j.value("block_length", options.block_length);
  options.steps = j.value("steps", options.steps);
  strategy = j.value("strategy", strategy);
  options.remasking.threshold = j.value("threshold", options.remasking.threshold);
  options.remasking.entropy_bound = j.value("entropy_bound", options.remasking.entropy_bound);
  options.sampling.temperature = j.value("temperature", options.sampling.temperature);
  options.sampling.top_k = j.value("top_k", options.sampling.top_k);
  options.sampling.top_p = j.value("top_p", options.sampling.top_p);
  options.max_new_tokens = j.value("max_new_tokens", options.max_new_tokens);
  stop_ids = j.value("stop_ids", stop_ids);
  vocab_limit = j.value("vocab_limit", vocab_limit);
  options.fused_store = j.value("fused_store", options.fused_store);
  no_chat_template = !j.value("chat_template", !no_chat_template);
  enable_thinking = j.value("enable_thinking", enable_thinking);
}

void add_reserve_whole_cache_flag(CLI::App& command, bool& flag) {
  command.add_flag("--reserve-whole-cache", flag,
                   "admit a sequence only once its whole KV cache (prompt + max new tokens) can "
                   "be reserved, never preempting (default: caches grow page by page; when the "
                   "cache is full the latest sequences are preempted and later recomputed)");
}

void add_decoding_options(CLI::App& command, DecodingArgs& args) {
  auto& o = args.options;
  command
      .add_option("--max-active", args.max_active,
                  "sequences decoded at once (0: as many as the KV cache holds)")
      ->capture_default_str();
  add_reserve_whole_cache_flag(command, args.reserve_whole_cache);
  command.add_option("--block-length", o.block_length, "tokens per block")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  command.add_option("--steps", o.steps, "at most this many denoising steps per block")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  command
      .add_option("--strategy", args.strategy,
                  "remasking: sequential, low_confidence_static, low_confidence_dynamic, "
                  "entropy_bounded")
      ->capture_default_str();
  command
      .add_option("--threshold", o.remasking.threshold,
                  "low_confidence_dynamic: unmask every position above this confidence")
      ->capture_default_str();
  command
      .add_option("--entropy-bound", o.remasking.entropy_bound,
                  "entropy_bounded: bound of the summed entropy (nats) of a step's positions")
      ->capture_default_str();
  command.add_option("--temperature", o.sampling.temperature, "0: greedy")->capture_default_str();
  command.add_option("--top-k", o.sampling.top_k, "0: off")->capture_default_str();
  command.add_option("--top-p", o.sampling.top_p, "1: off")->capture_default_str();
  command
      .add_option("--seed", o.sampling.seed,
                  "seed of the counter-based sampling RNG; sample j of a prompt draws with "
                  "seed + j")
      ->capture_default_str();
  command.add_option("--max-new-tokens", o.max_new_tokens, "token limit of each output")
      ->capture_default_str();
  command.add_option("--stop-ids", args.stop_ids, "an output ends at the first of these ids")
      ->capture_default_str();
  command.add_option("--vocab-limit", args.vocab_limit,
                     "ids at or above it are never emitted (default: the tokenizer's "
                     "vocabulary)");
  command.add_flag("!--no-fused-store", o.fused_store,
                   "run each store pass as its own forward instead of fusing it with the next "
                   "block's first denoising step");
  command.add_flag("--no-chat-template", args.no_chat_template,
                   "use the prompt as is, without the chat template");
  command.add_flag("--enable-thinking", args.enable_thinking,
                   "chat template with thinking enabled (default: disabled, as the paper)");
}

engine::GenerationOptions resolve(const DecodingArgs& args) {
  engine::GenerationOptions o = args.options;
  o.remasking.strategy = strategy_option(args.strategy);
  o.stop_ids = parse_token_ids(args.stop_ids, "--stop-ids");
  return o;
}

engine::GenerationOptions resolve(const DecodingArgs& args, std::int32_t mask_id,
                                  std::int32_t tokenizer_vocab) {
  engine::GenerationOptions o = resolve(args);
  o.sampling.mask_id = mask_id;
  o.sampling.vocab_limit = args.vocab_limit > 0 ? args.vocab_limit : tokenizer_vocab;
  return o;
}

}  // namespace dice::cli
