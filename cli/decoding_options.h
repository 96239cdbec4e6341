#pragma once
// The decoding options of `dice generate` and `dice bench` (system.md §2): one struct, one
// registration, one resolution into the engine's GenerationOptions.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "dice/core/error.h"
#include "dice/engine/block_decoder.h"
#include "dice/engine/generation.h"
#include "dice/engine/remasking.h"

namespace dice::cli {

/// The remasking strategy named by --strategy (system.md §2). Throws dice::InputError naming the
/// option and listing the valid names.
inline engine::RemaskingStrategy strategy_option(const std::string& name) {
  const auto strategy = engine::parse_strategy(name);
  if (!strategy)
    throw InputError(fmt::format(
        "--strategy {}: expected sequential, low_confidence_static, low_confidence_dynamic or "
        "entropy_bounded",
        name));
  return *strategy;
}

/// The scheduler's KV cache admission that --reserve-whole-cache (`reserve_whole_cache`) asks
/// for: kReserveWhole, else the default kGrowAndPreempt (engine/block_decoder.h).
inline engine::CacheAdmission admission_of(bool reserve_whole_cache) {
  return reserve_whole_cache ? engine::CacheAdmission::kReserveWhole
                             : engine::CacheAdmission::kGrowAndPreempt;
}

/// Adds the --reserve-whole-cache flag to `command`, setting `flag` (dice generate, dice bench
/// and dice engine bench share it).
void add_reserve_whole_cache_flag(CLI::App& command, bool& flag);

/// Decoding as given on the command line: block length, denoising steps, remasking strategy and
/// its threshold or entropy bound, sampling (temperature, top-k, top-p, seed), output limits,
/// the vocabulary limit, fused store passes, the chat template and the number of sequences
/// decoded at once.
struct DecodingArgs {
  engine::GenerationOptions options;  ///< numbers as given; strategy, stop ids, mask and
                                      ///< vocabulary limit are set by resolve()
  std::string strategy = "low_confidence_dynamic";
  std::string stop_ids = "151645,151643";  ///< <|im_end|>, <|endoftext|> (SDAR's chat template)
  std::int32_t vocab_limit = 0;            ///< 0: the tokenizer's vocabulary
  std::size_t max_active = 0;              ///< 0: as many as the KV cache holds
  bool reserve_whole_cache = false;        ///< engine::CacheAdmission::kReserveWhole
  bool no_chat_template = false;
  bool enable_thinking = false;

  /// The options as stored with a bench run (keys as dice bench has always written them).
  nlohmann::json to_json() const;
  /// Reads what to_json wrote; absent keys keep their value.
  void from_json(const nlohmann::json& j);
  /// generate()'s schedule: --max-active and --reserve-whole-cache.
  engine::ScheduleOptions schedule() const {
    return {.max_active = max_active, .admission = admission_of(reserve_whole_cache)};
  }
};

/// Registers --block-length, --steps, --strategy, --threshold, --entropy-bound, --temperature,
/// --top-k, --top-p, --seed, --max-new-tokens, --stop-ids, --vocab-limit, --no-fused-store,
/// --no-chat-template, --enable-thinking and --max-active on `command`.
void add_decoding_options(CLI::App& command, DecodingArgs& args);

/// The engine's decoding configuration: `args.options` with --strategy and --stop-ids parsed; the
/// mask id and vocabulary limit are left as they are (the model and tokenizer decide them, see
/// the overload). Throws dice::InputError naming the option for an unknown strategy or malformed
/// stop ids: call it before loading anything to fail early.
engine::GenerationOptions resolve(const DecodingArgs& args);

/// resolve(args) with the model's `mask_id` and the vocabulary limit (--vocab-limit, else
/// `tokenizer_vocab`: ids at or above it are never emitted).
engine::GenerationOptions resolve(const DecodingArgs& args, std::int32_t mask_id,
                                  std::int32_t tokenizer_vocab);

}  // namespace dice::cli
