// Loading a tokenizer folder: both Hugging Face layouts, and errors that name the file.

#include <gtest/gtest.h>

#include <string>

#include "dice/core/error.h"
#include "dice/core/files.h"
#include "dice/tokenizer/tokenizer.h"
#include "test_support.h"

namespace dice::tokenizer {
namespace {

using testing::ScratchDir;
using testing::ToyTokenizer;

ToyTokenizer hello_world() {
  ToyTokenizer toy;
  toy.merge("h", "e");
  toy.merge("l", "l");
  toy.merge("he", "ll");
  toy.merge("hell", "o");
  toy.merge(" ", "w");
  toy.merge("o", "r");
  toy.merge(" w", "or");
  toy.merge("l", "d");
  toy.merge(" wor", "ld");
  toy.add("<|end|>", true);
  toy.add("<think>", false);
  return toy;
}

// The message of the InputError `fn` throws.
template <class Fn>
std::string input_error(Fn&& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return {};
}

TEST(TokenizerLoad, VocabMergesAndTokenizerJsonGiveTheSameIds) {
  const ToyTokenizer toy = hello_world();
  ScratchDir a("dice_tok_a");
  ScratchDir b("dice_tok_b");
  ScratchDir c("dice_tok_c");
  toy.write_vocab_merges(a);
  toy.write_tokenizer_json(b, true);
  toy.write_tokenizer_json(c, false);
  const std::string text = "hello world<|end|>hello<think> world";
  const std::vector<std::int32_t> want = {toy.id("hello"), toy.id(" world"), 256 + 9,
                                          toy.id("hello"), 256 + 10,         toy.id(" world")};
  for (const auto* dir : {&a, &b, &c}) {
    const auto tok = Tokenizer::load(dir->path());
    EXPECT_EQ(tok.encode(text), want) << dir->path();
    EXPECT_EQ(tok.vocab_size(), 256 + 9 + 2);
    EXPECT_EQ(tok.token_id("<|end|>"), 256 + 9);
    EXPECT_EQ(tok.token_id(testing::byte_level(" world")), toy.id(" world"));
    EXPECT_FALSE(tok.token_id("nope").has_value());
    EXPECT_TRUE(tok.is_special(256 + 9));
    EXPECT_FALSE(tok.is_special(256 + 10));
    EXPECT_EQ(tok.decode(tok.encode(text)), text);
  }
}

TEST(TokenizerLoad, MissingOrMalformedFilesAreNamed) {
  ScratchDir dir("dice_tok_bad");
  EXPECT_NE(input_error([&] { Tokenizer::load(dir.path() / "absent"); }).find("not a directory"),
            std::string::npos);
  EXPECT_NE(input_error([&] { Tokenizer::load(dir.path()); }).find("vocab.json"),
            std::string::npos);

  const ToyTokenizer toy = hello_world();
  toy.write_vocab_merges(dir);
  std::filesystem::remove(dir.path() / "merges.txt");
  EXPECT_NE(input_error([&] { Tokenizer::load(dir.path()); }).find("merges.txt is missing"),
            std::string::npos);

  dir.write("merges.txt", "#version: 0.2\nh e\nl l extra\n");
  EXPECT_NE(input_error([&] { Tokenizer::load(dir.path()); }).find("merges.txt: line 3"),
            std::string::npos);
  dir.write("merges.txt", "h e\nq \xC3\xA9\xC3\xA9\n");
  EXPECT_NE(input_error([&] { Tokenizer::load(dir.path()); }).find("is not in the vocabulary"),
            std::string::npos);

  dir.write("merges.txt", "h e\n");
  dir.write("vocab.json", "{\"a\": 1,");
  const std::string json_error = input_error([&] { Tokenizer::load(dir.path()); });
  EXPECT_NE(json_error.find("vocab.json"), std::string::npos) << json_error;
  EXPECT_NE(json_error.find("not valid JSON"), std::string::npos) << json_error;
  dir.write("vocab.json", "{\"a\": \"one\"}");
  EXPECT_NE(input_error([&] { Tokenizer::load(dir.path()); }).find("\"a\": the id is not"),
            std::string::npos);
  dir.write("vocab.json", "{\"a\": 2000000000}");
  EXPECT_NE(input_error([&] { Tokenizer::load(dir.path()); }).find("too large"), std::string::npos);
  dir.write("vocab.json", "{\"a\": 0, \"b\": 0}");
  EXPECT_NE(input_error([&] { Tokenizer::load(dir.path()); }).find("id 0 is given to both"),
            std::string::npos);

  toy.write_vocab_merges(dir);
  dir.write("tokenizer_config.json", "{\"added_tokens_decoder\": {\"x\": {\"content\": \"a\"}}}");
  EXPECT_NE(input_error([&] { Tokenizer::load(dir.path()); }).find("tokenizer_config.json"),
            std::string::npos);
  dir.write("tokenizer_config.json", "{\"tokenizer_class\": \"LlamaTokenizer\"}");
  EXPECT_NE(input_error([&] { Tokenizer::load(dir.path()); }).find("LlamaTokenizer"),
            std::string::npos);
}

TEST(TokenizerLoad, UnsupportedTokenizerJsonPartsAreNamed) {
  ScratchDir dir("dice_tok_json");
  const ToyTokenizer toy = hello_world();
  toy.write_tokenizer_json(dir, true);
  auto root = nlohmann::json::parse(read_file(dir.path() / "tokenizer.json"));
  const auto with = [&](const char* key, nlohmann::json value) {
    auto copy = root;
    copy[key] = std::move(value);
    dir.write("tokenizer.json", copy.dump());
    return input_error([&] { Tokenizer::load(dir.path()); });
  };
  EXPECT_NE(with("normalizer", {{"type", "NFKC"}}).find("tokenizer.json: unsupported normalizer"),
            std::string::npos);
  EXPECT_NE(with("decoder", nullptr).find("unsupported decoder"), std::string::npos);
  EXPECT_NE(with("model", {{"type", "WordPiece"}}).find("WordPiece"), std::string::npos);
  auto bad_merge = root["model"];
  bad_merge["merges"] = {"h e", "l"};
  EXPECT_NE(with("model", bad_merge).find("model.merges[1]"), std::string::npos);
  EXPECT_NE(with("added_tokens", {{{"content", "x"}}}).find("no \"id\""), std::string::npos);
  auto pre = root["pre_tokenizer"];
  pre["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  EXPECT_NE(with("pre_tokenizer", pre).find("does not compile"), std::string::npos);
}

TEST(TokenizerLoad, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  ScratchDir dir("dice_tok_ignore");
  ToyTokenizer toy;
  const int ab = toy.merge("a", "b");
  const int abc = static_cast<int>(toy.vocab.size());
  toy.vocab[testing::byte_level("abc")] = abc;  // in the vocabulary, but no merge reaches it
  toy.write_tokenizer_json(dir, true);
  EXPECT_EQ(Tokenizer::load(dir.path()).encode("abc abcd"),
            (std::vector<std::int32_t>{ab, 'c', ' ', ab, 'c', 'd'}));
  auto root = nlohmann::json::parse(read_file(dir.path() / "tokenizer.json"));
  root["model"]["ignore_merges"] = true;
  dir.write("tokenizer.json", root.dump());
  EXPECT_EQ(Tokenizer::load(dir.path()).encode("abc abcd"),
            (std::vector<std::int32_t>{abc, ' ', ab, 'c', 'd'}));
}

TEST(TokenizerLoad, OtherPatternsRunOnPcre2) {
  ScratchDir dir("dice_tok_gpt2");
  ToyTokenizer toy = hello_world();
  toy.write_tokenizer_json(dir, true);
  auto root = nlohmann::json::parse(read_file(dir.path() / "tokenizer.json"));
  // GPT-2's ByteLevel pre-tokenizer: " ?\p{N}+" keeps digit runs together (Qwen2 splits them).
  root["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  dir.write("tokenizer.json", root.dump());
  const auto tok = Tokenizer::load(dir.path());
  EXPECT_EQ(tok.pieces("hello 123 world"), (std::vector<std::string>{"hello", " 123", " world"}));
}

}  // namespace
}  // namespace dice::tokenizer
