#pragma once
// Helpers of the tokenizer tests: scratch folders and a toy byte-level BPE tokenizer written in
// either Hugging Face layout.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bpe.h"
#include "utf8.h"

namespace dice::tokenizer::testing {

/// A fresh folder under the system temp folder, removed at the end of the test.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& stem) {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            (stem + "_" + std::to_string(rd()) + "_" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& name, const std::string& content) const {
    const auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

 private:
  std::filesystem::path path_;
};

/// Byte-level string of raw bytes (GPT-2's byte-to-unicode mapping).
inline std::string byte_level(std::string_view bytes) {
  static const auto table = detail::byte_to_unicode();
  std::string out;
  for (const char c : bytes) detail::append_utf8(out, table[static_cast<unsigned char>(c)]);
  return out;
}

/// A toy vocabulary: the 256 byte symbols (id = byte value), then one token per merge.
struct ToyTokenizer {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  std::vector<std::pair<std::string, std::string>> merges;  // byte-level strings
  nlohmann::ordered_json added = nlohmann::ordered_json::array();

  ToyTokenizer() {
    for (int b = 0; b < 256; ++b) vocab[byte_level(std::string(1, static_cast<char>(b)))] = b;
  }
  /// Adds the merge of two raw byte strings; returns the merged token's id.
  int merge(const std::string& left, const std::string& right) {
    merges.emplace_back(byte_level(left), byte_level(right));
    const std::string merged = byte_level(left + right);
    if (!vocab.contains(merged)) vocab[merged] = static_cast<int>(vocab.size());
    return vocab[merged].get<int>();
  }
  int id(const std::string& raw) const { return vocab.at(byte_level(raw)).get<int>(); }
  /// Adds an added token with the next id and Hugging Face's flags.
  int add(const std::string& content, bool special, bool lstrip = false, bool rstrip = false,
          bool single_word = false, bool normalized = false) {
    const int id = static_cast<int>(vocab.size() + added.size());
    added.push_back({{"id", id},
                     {"content", content},
                     {"single_word", single_word},
                     {"lstrip", lstrip},
                     {"rstrip", rstrip},
                     {"normalized", normalized},
                     {"special", special}});
    return id;
  }

  /// vocab.json + merges.txt + tokenizer_config.json (added_tokens_decoder).
  void write_vocab_merges(const ScratchDir& dir) const {
    dir.write("vocab.json", vocab.dump());
    std::string text = "#version: 0.2\n";
    for (const auto& [a, b] : merges) text += a + " " + b + "\n";
    dir.write("merges.txt", text);
    nlohmann::ordered_json decoder = nlohmann::ordered_json::object();
    for (const auto& t : added) {
      auto entry = t;
      entry.erase("id");
      decoder[std::to_string(t["id"].get<int>())] = entry;
    }
    dir.write("tokenizer_config.json", nlohmann::ordered_json{{"tokenizer_class", "Qwen2Tokenizer"},
                                                              {"added_tokens_decoder", decoder},
                                                              {"eos_token", nullptr},
                                                              {"pad_token", nullptr},
                                                              {"unk_token", nullptr}}
                                           .dump());
  }

  /// tokenizer.json in the layout tokenizers saves (merges as [a, b] pairs or "a b" strings).
  void write_tokenizer_json(const ScratchDir& dir, bool merges_as_pairs) const {
    nlohmann::ordered_json m = nlohmann::ordered_json::array();
    for (const auto& [a, b] : merges) {
      if (merges_as_pairs) {
        m.push_back({a, b});
      } else {
        m.push_back(a + " " + b);
      }
    }
    const std::string pattern =
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    nlohmann::ordered_json root = {{"version", "1.0"},
                                   {"added_tokens", added},
                                   {"normalizer", {{"type", "NFC"}}},
                                   {"pre_tokenizer",
                                    {{"type", "Sequence"},
                                     {"pretokenizers",
                                      {{{"type", "Split"},
                                        {"pattern", {{"Regex", pattern}}},
                                        {"behavior", "Isolated"},
                                        {"invert", false}},
                                       {{"type", "ByteLevel"},
                                        {"add_prefix_space", false},
                                        {"trim_offsets", false},
                                        {"use_regex", false}}}}}},
                                   {"decoder", {{"type", "ByteLevel"}}},
                                   {"model",
                                    {{"type", "BPE"},
                                     {"dropout", nullptr},
                                     {"unk_token", nullptr},
                                     {"byte_fallback", false},
                                     {"vocab", vocab},
                                     {"merges", m}}}};
    dir.write("tokenizer.json", root.dump());
  }
};

}  // namespace dice::tokenizer::testing
