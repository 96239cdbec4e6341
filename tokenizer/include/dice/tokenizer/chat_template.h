#pragma once
// The Qwen3 chat format of SDAR/DICE models (../shared/models/sdar/tokenizer/chat_template.jinja),
// implemented natively: byte-identical to the Jinja template for system, user and assistant turns.

#include <optional>
#include <span>
#include <string>

namespace dice::tokenizer {

/// One turn of a conversation.
struct ChatMessage {
  std::string role;  ///< "system", "user" or "assistant"
  std::string content;
  std::optional<std::string> reasoning_content;  ///< assistant thinking, if given separately
};

/// The templated conversation, as the Jinja template renders it with these arguments.
/// `add_generation_prompt`: end with `<|im_start|>assistant\n`; `enable_thinking == false` then
/// appends `<think>\n\n</think>\n\n`. Throws dice::InputError for an unknown role or an empty
/// conversation.
std::string apply_chat_template(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                std::optional<bool> enable_thinking = std::nullopt);

}  // namespace dice::tokenizer
