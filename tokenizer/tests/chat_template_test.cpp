// The Qwen3 chat template, on hand-written cases (the pytest suite compares with Jinja2 at scale).

#include "dice/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <vector>

#include "dice/core/error.h"

namespace dice::tokenizer {
namespace {

using Messages = std::vector<ChatMessage>;

TEST(ChatTemplate, UserTurnAndGenerationPrompt) {
  const Messages m = {{"user", "Write a kernel.", std::nullopt}};
  EXPECT_EQ(apply_chat_template(m, true),
            "<|im_start|>user\nWrite a kernel.<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(apply_chat_template(m, true, true),
            "<|im_start|>user\nWrite a kernel.<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(apply_chat_template(m, true, false),
            "<|im_start|>user\nWrite a kernel.<|im_end|>\n<|im_start|>assistant\n"
            "<think>\n\n</think>\n\n");
  EXPECT_EQ(apply_chat_template(m, false, false), "<|im_start|>user\nWrite a kernel.<|im_end|>\n");
}

TEST(ChatTemplate, SystemFirstAndLater) {
  const Messages m = {
      {"system", "S1", std::nullopt}, {"user", "U", std::nullopt}, {"system", "S2", std::nullopt}};
  EXPECT_EQ(apply_chat_template(m, false),
            "<|im_start|>system\nS1<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
            "<|im_start|>system\nS2<|im_end|>\n");
}

TEST(ChatTemplate, AssistantThinkingAfterTheLastQuery) {
  // Before the last user turn: content as is, thinking dropped. After it: the think block.
  const Messages m = {{"user", "q1", std::nullopt},
                      {"assistant", "<think>\nold\n</think>\n\na1", std::nullopt},
                      {"user", "q2", std::nullopt},
                      {"assistant", "\n\na2", std::string("\nr2\n")}};
  EXPECT_EQ(apply_chat_template(m, false),
            "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\na1<|im_end|>\n"
            "<|im_start|>user\nq2<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nr2\n</think>\n\na2<|im_end|>\n");
}

TEST(ChatTemplate, ToolResponsesDoNotCountAsQueries) {
  const Messages m = {{"user", "q", std::nullopt},
                      {"assistant", "pre<think>x</think>mid</think>\n\npost", std::nullopt},
                      {"user", "<tool_response>r</tool_response>", std::nullopt},
                      {"assistant", "done", std::nullopt}};
  // last_query_index = 0: both assistant turns come after it. The first one's reasoning is
  // "x" (before the first </think>, after the last <think>), its content "post".
  EXPECT_EQ(apply_chat_template(m, false),
            "<|im_start|>user\nq<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nx\n</think>\n\npost<|im_end|>\n"
            "<|im_start|>user\n<tool_response>r</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\ndone<|im_end|>\n");
}

TEST(ChatTemplate, BadConversationsAreInputErrors) {
  EXPECT_THROW(apply_chat_template(Messages{}, true), InputError);
  EXPECT_THROW(apply_chat_template(Messages{{"tool", "x", std::nullopt}}, true), InputError);
  EXPECT_THROW(apply_chat_template(Messages{{"robot", "x", std::nullopt}}, true), InputError);
}

}  // namespace
}  // namespace dice::tokenizer
