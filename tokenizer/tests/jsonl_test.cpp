// `dice tokenize`'s record loop: one output line per input line, echoed fields, error lines.

#include "dice/tokenizer/jsonl.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "test_support.h"

namespace dice::tokenizer {
namespace {

using testing::ScratchDir;
using testing::ToyTokenizer;

std::vector<nlohmann::json> run(const Tokenizer& tok, const std::string& input,
                                TokenizeOptions options) {
  std::istringstream in(input);
  std::ostringstream out;
  tokenize_jsonl(tok, in, out, options);
  std::vector<nlohmann::json> lines;
  std::istringstream back(out.str());
  for (std::string line; std::getline(back, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

class TokenizeJsonl : public ::testing::Test {
 protected:
  void SetUp() override {
    toy_.merge("h", "i");
    end_ = toy_.add("<|im_end|>", true);
    toy_.add("<|im_start|>", true);
    toy_.write_vocab_merges(dir_);
  }
  ScratchDir dir_{"dice_tok_jsonl"};
  ToyTokenizer toy_;
  int end_ = 0;
};

TEST_F(TokenizeJsonl, EncodeEchoesFieldsAndReportsBadLines) {
  const auto tok = Tokenizer::load(dir_.path());
  const auto out = run(tok,
                       "{\"id\": 7, \"text\": \"hi<|im_end|>\"}\n"
                       "not json\n"
                       "\n"
                       "{\"id\": 8}\n"
                       "[1, 2]\n"
                       "{\"text\": 5, \"id\": \"x\"}\n"
                       "{\"text\": \"\"}\n",
                       {});
  ASSERT_EQ(out.size(), 7u);
  EXPECT_EQ(out[0], (nlohmann::json{{"id", 7}, {"ids", {toy_.id("hi"), end_}}}));
  EXPECT_EQ(out[0].begin().key(), "id");  // echoed fields keep their place
  EXPECT_NE(out[1]["error"].get<std::string>().find("line 2: not valid JSON"), std::string::npos);
  EXPECT_NE(out[2]["error"].get<std::string>().find("line 3:"), std::string::npos);
  EXPECT_EQ(out[3]["error"], "line 4: no \"text\" field");
  EXPECT_EQ(out[3]["id"], 8);
  EXPECT_EQ(out[4]["error"], "line 5: not a JSON object");
  EXPECT_EQ(out[5]["error"], "line 6: \"text\" is not a string");
  EXPECT_EQ(out[6]["ids"], nlohmann::json::array());
}

TEST_F(TokenizeJsonl, DecodeChatAndPieces) {
  const auto tok = Tokenizer::load(dir_.path());
  TokenizeOptions decode;
  decode.mode = TokenizeOptions::Mode::kDecode;
  auto out = run(tok,
                 "{\"ids\": [" + std::to_string(toy_.id("hi")) + ", " + std::to_string(end_) +
                     "]}\n{\"ids\": [99999]}\n{\"ids\": [1.5]}\n",
                 decode);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0]["text"], "hi<|im_end|>");
  EXPECT_NE(out[1]["error"].get<std::string>().find("99999"), std::string::npos);
  EXPECT_EQ(out[2]["error"], "line 3: \"ids\"[0] is not a token id");
  decode.skip_special = true;
  EXPECT_EQ(run(tok, "{\"ids\": [" + std::to_string(end_) + "]}\n", decode)[0]["text"], "");

  TokenizeOptions chat;
  chat.mode = TokenizeOptions::Mode::kChat;
  chat.enable_thinking = false;
  out = run(tok,
            "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"n\": 1}\n"
            "{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}\n"
            "{\"messages\": [{\"role\": \"user\"}]}\n"
            "{\"messages\": [], \"tools\": [{}]}\n",
            chat);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0]["n"], 1);
  EXPECT_EQ(out[0]["text"],
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(out[0]["ids"].size(), tok.encode(out[0]["text"].get<std::string>()).size());
  EXPECT_NE(out[1]["error"].get<std::string>().find("tool"), std::string::npos);
  EXPECT_NE(out[2]["error"].get<std::string>().find("content"), std::string::npos);
  EXPECT_NE(out[3]["error"].get<std::string>().find("tools"), std::string::npos);

  TokenizeOptions pieces;
  pieces.mode = TokenizeOptions::Mode::kPieces;
  out = run(tok, "{\"text\": \"hi  there<|im_end|>\"}\n", pieces);
  EXPECT_EQ(out[0]["pieces"], (nlohmann::json{"hi", " ", " there", "<|im_end|>"}));
}

}  // namespace
}  // namespace dice::tokenizer
