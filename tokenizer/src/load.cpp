#include "load.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <optional>
#include <set>

#include "dice/core/error.h"
#include "dice/core/files.h"

namespace dice::tokenizer::detail {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void fail(const fs::path& file, const std::string& what) {
  throw InputError("tokenizer file " + file.string() + ": " + what);
}

json parse_json_file(const fs::path& file) {
  const std::string text = read_file(file);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail(file, std::string("not valid JSON: ") + e.what());
  }
}

std::int32_t parse_id(const json& value, const fs::path& file, const std::string& what) {
  if (!value.is_number_integer()) fail(file, what + ": the id is not an integer");
  const auto id = value.get<std::int64_t>();
  if (id < 0 || id >= std::numeric_limits<std::int32_t>::max())
    fail(file, what + ": id " + std::to_string(id) + " is out of range");
  return static_cast<std::int32_t>(id);
}

std::vector<std::pair<std::string, std::int32_t>> parse_vocab(const json& vocab,
                                                              const fs::path& file) {
  if (!vocab.is_object()) fail(file, "the vocabulary is not a JSON object of token -> id");
  std::vector<std::pair<std::string, std::int32_t>> out;
  out.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items())
    out.emplace_back(token, parse_id(id, file, "token \"" + token + "\""));
  return out;
}

// Reads a vocab.json (one flat object of token -> id) with nlohmann's SAX interface: a DOM of
// 150k entries costs most of a load.
class VocabReader : public nlohmann::json_sax<json> {
 public:
  explicit VocabReader(std::vector<std::pair<std::string, std::int32_t>>& out) : out_(out) {}
  bool null() override { return bad_value(); }
  bool boolean(bool /*value*/) override { return bad_value(); }
  bool number_integer(number_integer_t value) override { return id(value); }
  bool number_unsigned(number_unsigned_t value) override {
    return id(value > static_cast<number_unsigned_t>(std::numeric_limits<std::int64_t>::max())
                  ? -1
                  : static_cast<std::int64_t>(value));
  }
  bool number_float(number_float_t /*value*/, const string_t& /*text*/) override {
    return bad_value();
  }
  bool string(string_t& /*value*/) override { return bad_value(); }
  bool binary(binary_t& /*value*/) override { return bad_value(); }
  bool start_object(std::size_t /*size*/) override { return ++depth_ == 1 || fail_nested(); }
  bool key(string_t& value) override {
    key_ = std::move(value);
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t /*size*/) override {
    return depth_ == 0 ? fail_nested() : bad_value();
  }
  bool end_array() override { return true; }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& e) override {
    error_ = std::string("not valid JSON: ") + e.what();
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  bool id(std::int64_t value) {
    if (value < 0 || value >= std::numeric_limits<std::int32_t>::max()) {
      error_ = "token \"" + key_ + "\": id " + std::to_string(value) + " is out of range";
      return false;
    }
    out_.emplace_back(std::move(key_), static_cast<std::int32_t>(value));
    return true;
  }
  bool bad_value() {
    error_ = "token \"" + key_ + "\": the id is not an integer";
    return false;
  }
  bool fail_nested() {
    error_ = "the vocabulary is not a JSON object of token -> id";
    return false;
  }

  std::vector<std::pair<std::string, std::int32_t>>& out_;
  std::string key_;
  std::string error_;
  int depth_ = 0;
};

std::vector<std::pair<std::string, std::int32_t>> read_vocab_json(const fs::path& file) {
  const std::string text = read_file(file);
  std::vector<std::pair<std::string, std::int32_t>> out;
  out.reserve(text.size() / 16);
  VocabReader reader(out);
  if (!json::sax_parse(text, &reader)) fail(file, reader.error());
  return out;
}

bool flag(const json& object, const char* key, bool fallback, const fs::path& file) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    fail(file, std::string("added token flag \"") + key + "\" is not a boolean");
  return it->get<bool>();
}

AddedToken parse_added_token(const json& object, std::int32_t id, const fs::path& file) {
  if (!object.is_object()) fail(file, "added token " + std::to_string(id) + " is not an object");
  const auto content = object.find("content");
  if (content == object.end() || !content->is_string())
    fail(file, "added token " + std::to_string(id) + " has no string \"content\"");
  AddedToken t;
  t.content = content->get<std::string>();
  t.id = id;
  t.special = flag(object, "special", false, file);
  t.single_word = flag(object, "single_word", false, file);
  t.lstrip = flag(object, "lstrip", false, file);
  t.rstrip = flag(object, "rstrip", false, file);
  t.normalized = flag(object, "normalized", !t.special, file);
  return t;
}

std::string require_string(const json& object, const char* key, const fs::path& file,
                           const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) fail(file, where + " has no string \"" + key + "\"");
  return it->get<std::string>();
}

// ---- tokenizer.json -------------------------------------------------------------------------

void read_normalizer(const json& normalizer, TokenizerSpec& spec, const fs::path& file) {
  if (normalizer.is_null()) {
    spec.nfc = false;
    return;
  }
  const std::string type = require_string(normalizer, "type", file, "normalizer");
  if (type == "NFC") {
    spec.nfc = true;
  } else if (type == "Sequence") {
    spec.nfc = false;
    for (const auto& inner : normalizer.value("normalizers", json::array())) {
      if (require_string(inner, "type", file, "normalizer") != "NFC")
        fail(file, "unsupported normalizer in the sequence (only NFC is)");
      spec.nfc = true;
    }
  } else {
    fail(file, "unsupported normalizer \"" + type + "\" (dice supports NFC or none)");
  }
}

void read_byte_level(const json& pre, bool want_regex, const fs::path& file) {
  if (pre.value("add_prefix_space", false))
    fail(file, "ByteLevel pre-tokenizer with add_prefix_space = true is not supported");
  if (pre.value("use_regex", true) != want_regex)
    fail(file, want_regex ? "a lone ByteLevel pre-tokenizer must split (use_regex = true)"
                          : "ByteLevel after Split must not split again (use_regex = false)");
}

std::string regex_escape(std::string_view literal) {
  std::string out;
  for (const char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

void read_pre_tokenizer(const json& pre, TokenizerSpec& spec, const fs::path& file) {
  const std::string unsupported =
      "unsupported pre_tokenizer (dice supports Sequence[Split(isolated), ByteLevel] or "
      "ByteLevel)";
  if (!pre.is_object()) fail(file, unsupported);
  const std::string type = require_string(pre, "type", file, "pre_tokenizer");
  if (type == "ByteLevel") {
    read_byte_level(pre, true, file);
    spec.pattern = kGpt2Pattern;
    return;
  }
  if (type != "Sequence") fail(file, unsupported);
  const json steps = pre.value("pretokenizers", json::array());
  if (steps.size() != 2 || !steps[0].is_object() || !steps[1].is_object() ||
      steps[0].value("type", "") != "Split" || steps[1].value("type", "") != "ByteLevel") {
    fail(file, unsupported);
  }
  const json& split = steps[0];
  if (split.value("behavior", "") != "Isolated" || split.value("invert", false))
    fail(file, "unsupported Split pre-tokenizer (dice supports behavior Isolated, invert false)");
  const json pattern = split.value("pattern", json::object());
  if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
    spec.pattern = pattern["Regex"].get<std::string>();
  } else if (pattern.contains("String") && pattern["String"].is_string()) {
    spec.pattern = regex_escape(pattern["String"].get<std::string>());
  } else {
    fail(file, "Split pre-tokenizer has no Regex or String pattern");
  }
  read_byte_level(steps[1], false, file);
}

void read_tokenizer_json(const fs::path& file, TokenizerSpec& spec) {
  const json root = parse_json_file(file);
  if (!root.is_object()) fail(file, "not a JSON object");
  spec.vocab_source = spec.merges_source = spec.pattern_source = file.string();
  const json model = root.value("model", json());
  if (!model.is_object()) fail(file, "no \"model\" object");
  if (model.value("type", "BPE") != "BPE")
    fail(file, "model type \"" + model.value("type", "") + "\" is not supported (only BPE)");
  if (!model.value("dropout", json()).is_null()) fail(file, "BPE dropout is not supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json v = model.value(key, json());
    if (!v.is_null() && !(v.is_string() && v.get<std::string>().empty()))
      fail(file, std::string("BPE ") + key + " is not supported");
  }
  if (model.value("byte_fallback", false)) fail(file, "BPE byte_fallback is not supported");
  spec.ignore_merges = model.value("ignore_merges", false);
  spec.vocab = parse_vocab(model.value("vocab", json()), file);
  const json merges = model.value("merges", json::array());
  if (!merges.is_array()) fail(file, "model.merges is not an array");
  spec.merges.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_string()) {
      const auto s = m.get<std::string>();
      const auto space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        fail(file, "model.merges[" + std::to_string(i) + "] is not two tokens \"a b\"");
      spec.merges.push_back({s.substr(0, space), s.substr(space + 1), i});
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec.merges.push_back({m[0].get<std::string>(), m[1].get<std::string>(), i});
    } else {
      fail(file, "model.merges[" + std::to_string(i) + "] is neither \"a b\" nor [a, b]");
    }
  }
  read_normalizer(root.value("normalizer", json()), spec, file);
  read_pre_tokenizer(root.value("pre_tokenizer", json()), spec, file);
  const json decoder = root.value("decoder", json());
  if (!decoder.is_object() || decoder.value("type", "") != "ByteLevel")
    fail(file, "unsupported decoder (dice supports ByteLevel)");
  const json added = root.value("added_tokens", json::array());
  if (!added.is_array()) fail(file, "added_tokens is not an array");
  for (const json& t : added) {
    if (!t.is_object() || !t.contains("id")) fail(file, "an added token has no \"id\"");
    spec.added.push_back(parse_added_token(t, parse_id(t["id"], file, "added token"), file));
  }
}

// ---- vocab.json + merges.txt ------------------------------------------------------------------

void read_merges_txt(const fs::path& file, TokenizerSpec& spec) {
  const std::string text = read_file(file);
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with("#version") || line.empty()) continue;
    const auto space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
      fail(file, "line " + std::to_string(line_no) + " is not two tokens separated by a space");
    spec.merges.push_back(
        {std::string(line.substr(0, space)), std::string(line.substr(space + 1)), line_no});
  }
}

// The string of a special-token setting: "tok" or {"content": "tok", ...}.
std::optional<std::string> token_string(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string())
    return value["content"].get<std::string>();
  return std::nullopt;
}

// Named special tokens, in transformers' order: bos, eos, unk, sep, pad, cls, mask, then the
// additional/extra lists. tokenizer_config.json wins; special_tokens_map.json fills missing keys;
// Qwen2Tokenizer's defaults (unk, eos, pad = <|endoftext|>) apply when neither has the key.
std::vector<std::string> named_special_tokens(const json& config, const json& map,
                                              bool include_lists) {
  std::vector<std::string> out;
  const auto lookup = [&](const char* key) -> const json* {
    if (config.is_object() && config.contains(key)) return &config[key];
    if (map.is_object() && map.contains(key)) return &map[key];
    return nullptr;
  };
  static const json kEndOfText = "<|endoftext|>";
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                          "cls_token", "mask_token"}) {
    const json* v = lookup(key);
    const std::string_view k(key);
    if (v == nullptr && (k == "unk_token" || k == "eos_token" || k == "pad_token")) v = &kEndOfText;
    if (v == nullptr) continue;
    if (auto s = token_string(*v)) out.push_back(*s);
  }
  if (include_lists) {
    for (const char* key : {"additional_special_tokens", "extra_special_tokens"}) {
      const json* v = lookup(key);
      if (v == nullptr) continue;
      if (v->is_array()) {
        for (const json& item : *v)
          if (auto s = token_string(item)) out.push_back(*s);
      } else if (v->is_object()) {
        for (const auto& [name, item] : v->items())
          if (auto s = token_string(item)) out.push_back(*s);
      }
    }
  }
  return out;
}

// transformers re-adds every named special token as AddedToken(content, special=True): an added
// token of that content gets special = true and its other flags reset; a token of the base
// vocabulary becomes an added special token; an unknown one gets the next free id.
void apply_named_specials(const std::vector<std::string>& names, TokenizerSpec& spec) {
  std::int32_t next_id = static_cast<std::int32_t>(spec.vocab.size());
  for (const auto& t : spec.added) next_id = std::max(next_id, t.id + 1);
  std::set<std::string> seen;
  for (const auto& name : names) {
    if (name.empty() || !seen.insert(name).second) continue;
    AddedToken reset;
    reset.content = name;
    reset.special = true;
    reset.normalized = false;
    auto it = std::find_if(spec.added.begin(), spec.added.end(),
                           [&](const AddedToken& t) { return t.content == name; });
    if (it != spec.added.end()) {
      reset.id = it->id;
      *it = reset;
      continue;
    }
    auto v = std::find_if(spec.vocab.begin(), spec.vocab.end(),
                          [&](const auto& entry) { return entry.first == name; });
    reset.id = v != spec.vocab.end() ? v->second : next_id++;
    spec.added.push_back(reset);
  }
}

void read_vocab_merges(const fs::path& dir, TokenizerSpec& spec) {
  const fs::path vocab_file = dir / "vocab.json";
  const fs::path merges_file = dir / "merges.txt";
  if (!fs::is_regular_file(merges_file))
    throw InputError("tokenizer folder " + dir.string() +
                     ": merges.txt is missing (needed beside vocab.json)");
  spec.vocab_source = vocab_file.string();
  spec.merges_source = merges_file.string();
  spec.pattern_source = "the Qwen2 pre-tokenizer pattern";
  spec.vocab = read_vocab_json(vocab_file);
  read_merges_txt(merges_file, spec);
}

void read_config(const fs::path& dir, TokenizerSpec& spec, bool vocab_form) {
  const fs::path config_file = dir / "tokenizer_config.json";
  const fs::path map_file = dir / "special_tokens_map.json";
  const fs::path added_file = dir / "added_tokens.json";
  json config = json::object();
  if (fs::exists(config_file)) {
    config = parse_json_file(config_file);
    if (!config.is_object()) fail(config_file, "not a JSON object");
  }
  if (vocab_form) {
    const std::string cls = config.value("tokenizer_class", "Qwen2Tokenizer");
    if (cls != "Qwen2Tokenizer" && cls != "Qwen2TokenizerFast")
      fail(config_file, "tokenizer_class \"" + cls +
                            "\" is not supported in the vocab.json + merges.txt form (only "
                            "Qwen2Tokenizer; give a tokenizer.json)");
    if (config.value("add_prefix_space", json()).is_boolean() &&
        config["add_prefix_space"].get<bool>())
      fail(config_file, "add_prefix_space = true is not supported");
  } else if (!fs::exists(config_file)) {
    return;  // a bare tokenizer.json: exactly what it says
  }
  if (config.value("split_special_tokens", json()).is_boolean())
    spec.split_special_tokens = config["split_special_tokens"].get<bool>();
  const bool has_decoder = config.contains("added_tokens_decoder");
  json map = json::object();
  if (!has_decoder && fs::exists(map_file)) {
    map = parse_json_file(map_file);
    if (!map.is_object()) fail(map_file, "not a JSON object");
  }
  if (vocab_form && has_decoder) {
    const json& decoder = config["added_tokens_decoder"];
    if (!decoder.is_object()) fail(config_file, "added_tokens_decoder is not an object");
    for (const auto& [key, value] : decoder.items()) {
      std::int32_t id = -1;
      try {
        std::size_t used = 0;
        const long long v = std::stoll(key, &used);
        if (used != key.size() || v < 0 || v >= std::numeric_limits<std::int32_t>::max())
          throw std::invalid_argument(key);
        id = static_cast<std::int32_t>(v);
      } catch (const std::exception&) {
        fail(config_file, "added_tokens_decoder key \"" + key + "\" is not a token id");
      }
      spec.added.push_back(parse_added_token(value, id, config_file));
    }
  } else if (vocab_form && fs::exists(added_file)) {
    // Legacy: added_tokens.json; special when named as a special token (not in the lists).
    const json added = parse_json_file(added_file);
    if (!added.is_object()) fail(added_file, "not a JSON object of token -> id");
    const auto named = named_special_tokens(config, map, false);
    for (const auto& [content, id] : added.items()) {
      AddedToken t;
      t.content = content;
      t.id = parse_id(id, added_file, "token \"" + content + "\"");
      t.special = std::find(named.begin(), named.end(), content) != named.end();
      t.normalized = !t.special;
      spec.added.push_back(t);
    }
    std::sort(spec.added.begin(), spec.added.end(),
              [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  }
  apply_named_specials(named_special_tokens(config, map, true), spec);
}

}  // namespace

TokenizerSpec load_spec(const fs::path& dir) {
  if (!fs::is_directory(dir))
    throw InputError("tokenizer folder " + dir.string() + ": not a directory");
  TokenizerSpec spec;
  const fs::path tokenizer_json = dir / "tokenizer.json";
  if (fs::is_regular_file(tokenizer_json)) {
    read_tokenizer_json(tokenizer_json, spec);
    read_config(dir, spec, false);
  } else if (fs::is_regular_file(dir / "vocab.json")) {
    read_vocab_merges(dir, spec);
    read_config(dir, spec, true);
  } else {
    throw InputError("tokenizer folder " + dir.string() +
                     ": neither tokenizer.json nor vocab.json + merges.txt is there");
  }
  return spec;
}

}  // namespace dice::tokenizer::detail
