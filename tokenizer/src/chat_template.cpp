// The Qwen3 chat template (../shared/models/sdar/tokenizer/chat_template.jinja) without tools,
// rendered natively. Each step below mirrors one statement of the Jinja source.

#include "dice/tokenizer/chat_template.h"

#include <cstddef>
#include <string_view>

#include "dice/core/error.h"

namespace dice::tokenizer {

namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

// Python's str.lstrip('\n'), rstrip('\n') and strip('\n').
std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_newlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}
std::string_view strip_newlines(std::string_view s) {
  return rstrip_newlines(lstrip_newlines(s));
}

// Python's s.split(sep)[0] and s.split(sep)[-1].
std::string_view before_first(std::string_view s, std::string_view sep) {
  const auto at = s.find(sep);
  return at == std::string_view::npos ? s : s.substr(0, at);
}
std::string_view after_last(std::string_view s, std::string_view sep) {
  const auto at = s.rfind(sep);
  return at == std::string_view::npos ? s : s.substr(at + sep.size());
}

bool is_tool_response(std::string_view content) {
  return content.starts_with("<tool_response>") && content.ends_with("</tool_response>");
}

}  // namespace

std::string apply_chat_template(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                std::optional<bool> enable_thinking) {
  if (messages.empty()) throw InputError("chat template: the conversation has no messages");
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role == "tool")
      throw InputError("chat template: message " + std::to_string(i) +
                       " has role \"tool\"; tool calls are not supported by dice");
    if (role != "system" && role != "user" && role != "assistant")
      throw InputError("chat template: message " + std::to_string(i) + " has unknown role \"" +
                       role + "\" (expected system, user or assistant)");
  }
  std::string out;
  if (messages[0].role == "system")
    out.append("<|im_start|>system\n").append(messages[0].content).append("<|im_end|>\n");

  // The last user turn that is not a tool response (ns.last_query_index).
  std::size_t last_query_index = messages.size() - 1;
  for (std::size_t k = messages.size(); k-- > 0;) {
    if (messages[k].role == "user" && !is_tool_response(messages[k].content)) {
      last_query_index = k;
      break;
    }
  }

  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out.append("<|im_start|>").append(m.role).append("\n").append(m.content);
      out.append("<|im_end|>\n");
      continue;
    }
    if (m.role != "assistant") continue;
    std::string_view content = m.content;
    std::string_view reasoning;
    if (m.reasoning_content.has_value()) {
      reasoning = *m.reasoning_content;
    } else if (content.find(kThinkClose) != std::string_view::npos) {
      const std::string_view whole = m.content;
      content = lstrip_newlines(after_last(whole, kThinkClose));
      reasoning = lstrip_newlines(
          after_last(rstrip_newlines(before_first(whole, kThinkClose)), kThinkOpen));
    }
    const bool last = i + 1 == messages.size();
    out.append("<|im_start|>").append(m.role).append("\n");
    if (i > last_query_index && (last || !reasoning.empty())) {
      out.append("<think>\n").append(strip_newlines(reasoning)).append("\n</think>\n\n");
      out.append(lstrip_newlines(content));
    } else {
      out.append(content);
    }
    out.append("<|im_end|>\n");
  }
  if (add_generation_prompt) {
    out.append("<|im_start|>assistant\n");
    if (enable_thinking.has_value() && !*enable_thinking) out.append("<think>\n\n</think>\n\n");
  }
  return out;
}

}  // namespace dice::tokenizer
