// ModelConfig from and to Hugging Face config.json (SDAR / Qwen3 keys; system.md §2).

#include "dice/model/config.h"

#include <limits>
#include <string>

#include "dice/core/error.h"
#include "dice/core/files.h"

namespace dice::model {

using nlohmann::json;

namespace {

// Reads an integer field; `required` fields must be present, others keep `out` when absent.
void read_int(const json& j, const char* key, bool required, std::int64_t& out,
              const std::string& source) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) throw InputError(source + ": missing \"" + std::string(key) + "\"");
    return;
  }
  if (it->is_number_integer()) {
    out = it->get<std::int64_t>();
    return;
  }
  // Some writers store integral values as floats (2048.0): accept those, nothing else.
  if (it->is_number_float()) {
    const double v = it->get<double>();
    if (v == static_cast<double>(static_cast<std::int64_t>(v))) {
      out = static_cast<std::int64_t>(v);
      return;
    }
  }
  throw InputError(source + ": \"" + std::string(key) + "\" is " + it->dump() + ", not an integer");
}

void read_double(const json& j, const char* key, double& out, const std::string& source) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if (!it->is_number())
    throw InputError(source + ": \"" + std::string(key) + "\" is " + it->dump() + ", not a number");
  out = it->get<double>();
}

void read_bool(const json& j, const char* key, bool& out, const std::string& source) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if (!it->is_boolean())
    throw InputError(source + ": \"" + std::string(key) + "\" is " + it->dump() +
                     ", not true or false");
  out = it->get<bool>();
}

}  // namespace

void ModelConfig::validate(const std::string& source) const {
  const auto positive = [&](const char* key, std::int64_t v) {
    if (v <= 0)
      throw InputError(source + ": \"" + std::string(key) + "\" is " + std::to_string(v) +
                       ", must be positive");
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("num_hidden_layers", num_layers);
  positive("num_attention_heads", num_heads);
  positive("num_key_value_heads", num_kv_heads);
  positive("head_dim", head_dim);
  positive("intermediate_size", intermediate_size);
  positive("block_size", block_size);
  positive("max_position_embeddings", max_position_embeddings);
  if (num_heads % num_kv_heads != 0)
    throw InputError(source + ": num_attention_heads " + std::to_string(num_heads) +
                     " is not a multiple of num_key_value_heads " + std::to_string(num_kv_heads));
  // Projections are [num_heads*head_dim, hidden] and friends: keep every product representable
  // and far below what a tensor index can address.
  constexpr std::int64_t kMaxDim = std::int64_t{1} << 24;
  for (const auto& [key, v] : {std::pair{"vocab_size", vocab_size},
                               {"hidden_size", hidden_size},
                               {"num_attention_heads * head_dim", num_heads * head_dim},
                               {"intermediate_size", intermediate_size}}) {
    if (v > kMaxDim)
      throw InputError(source + ": \"" + std::string(key) + "\" is " + std::to_string(v) +
                       ", larger than dice supports (" + std::to_string(kMaxDim) + ")");
  }
  if (num_layers > 4096 || head_dim > 4096)
    throw InputError(source + ": num_hidden_layers or head_dim is implausibly large");
  if (head_dim % 2 != 0)
    throw InputError(source + ": head_dim " + std::to_string(head_dim) +
                     " is odd (rotate-half RoPE needs an even head_dim)");
  if (mask_token_id < 0 || mask_token_id >= vocab_size)
    throw InputError(source + ": mask_token_id " + std::to_string(mask_token_id) +
                     " is outside the vocabulary (vocab_size " + std::to_string(vocab_size) + ")");
  if (!(rope_theta > 0.0))
    throw InputError(source + ": rope_theta " + std::to_string(rope_theta) + " must be > 0");
  if (!(rms_norm_eps > 0.0) || rms_norm_eps > 1.0)
    throw InputError(source + ": rms_norm_eps " + std::to_string(rms_norm_eps) +
                     " must be in (0, 1]");
}

ModelConfig ModelConfig::from_json(const json& j, const std::string& source) {
  if (!j.is_object()) throw InputError(source + ": config is not a JSON object");
  ModelConfig c;
  read_int(j, "vocab_size", false, c.vocab_size, source);
  read_int(j, "hidden_size", true, c.hidden_size, source);
  read_int(j, "num_hidden_layers", true, c.num_layers, source);
  read_int(j, "num_attention_heads", true, c.num_heads, source);
  read_int(j, "num_key_value_heads", true, c.num_kv_heads, source);
  read_int(j, "head_dim", false, c.head_dim, source);
  read_int(j, "intermediate_size", true, c.intermediate_size, source);
  read_double(j, "rope_theta", c.rope_theta, source);
  read_double(j, "rms_norm_eps", c.rms_norm_eps, source);
  read_bool(j, "tie_word_embeddings", c.tie_word_embeddings, source);
  read_int(j, "block_size", false, c.block_size, source);
  std::int64_t mask = c.mask_token_id;
  read_int(j, "mask_token_id", false, mask, source);
  if (mask < 0 || mask > std::numeric_limits<std::int32_t>::max())
    throw InputError(source + ": mask_token_id " + std::to_string(mask) + " is out of range");
  c.mask_token_id = static_cast<std::int32_t>(mask);
  read_int(j, "max_position_embeddings", false, c.max_position_embeddings, source);

  // What the Qwen3 layers of dice implement; anything else would be computed wrongly.
  // transformers >= 5 writes {"rope_parameters": {"rope_theta", "rope_type": "default"}}.
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    const std::string at = source + ": \"" + key + "\" " + it->dump();
    if (!it->is_object()) throw InputError(at + " is not an object");
    for (const char* type_key : {"rope_type", "type"}) {
      const auto t = it->find(type_key);
      if (t != it->end() && !t->is_null() && *t != "default")
        throw InputError(at + " is not supported (dice implements plain RoPE: type default)");
    }
    for (const auto& [k, v] : it->items())
      if (k != "rope_type" && k != "type" && k != "rope_theta")
        throw InputError(at + ": parameter \"" + k + "\" is not supported (plain RoPE only)");
    read_double(*it, "rope_theta", c.rope_theta, at);
  }
  if (const auto it = j.find("layer_types"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) throw InputError(source + ": \"layer_types\" is not an array");
    for (const json& t : *it)
      if (t != "full_attention")
        throw InputError(source + ": layer type " + t.dump() +
                         " is not supported (full_attention only)");
  }
  bool flag = false;
  read_bool(j, "attention_bias", flag, source);
  if (flag) throw InputError(source + ": attention_bias true is not supported (SDAR has none)");
  flag = false;
  read_bool(j, "use_sliding_window", flag, source);
  if (flag) throw InputError(source + ": use_sliding_window true is not supported");
  if (const auto it = j.find("hidden_act"); it != j.end() && !it->is_null() && *it != "silu")
    throw InputError(source + ": hidden_act " + it->dump() + " is not supported (silu only)");
  c.validate(source);
  return c;
}

ModelConfig ModelConfig::load(const std::filesystem::path& path) {
  const std::string text = read_file(path);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(path.string() + ": not valid JSON: " + e.what());
  }
  return from_json(j, path.string());
}

json ModelConfig::to_json() const {
  return json{
      {"architectures", {"SDARForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"bos_token_id", 151643},
      {"eos_token_id", 151643},
      {"block_size", block_size},
      {"mask_token_id", mask_token_id},
      {"head_dim", head_dim},
      {"hidden_act", "silu"},
      {"hidden_size", hidden_size},
      {"initializer_range", 0.02},
      {"intermediate_size", intermediate_size},
      {"max_position_embeddings", max_position_embeddings},
      {"max_window_layers", num_layers},
      {"model_type", "sdar"},
      {"num_attention_heads", num_heads},
      {"num_hidden_layers", num_layers},
      {"num_key_value_heads", num_kv_heads},
      {"rms_norm_eps", rms_norm_eps},
      {"rope_scaling", nullptr},
      {"rope_theta", rope_theta},
      {"sliding_window", nullptr},
      {"tie_word_embeddings", tie_word_embeddings},
      {"torch_dtype", "bfloat16"},
      {"use_sliding_window", false},
      {"vocab_size", vocab_size},
  };
}

ModelConfig tiny_config() {
  ModelConfig c;
  c.vocab_size = 151936;
  c.hidden_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 128;
  c.block_size = 4;
  return c;
}

ModelConfig config_preset(const std::string& name_or_path) {
  if (name_or_path == "tiny") return tiny_config();
  std::filesystem::path path(name_or_path);
  if (std::filesystem::is_directory(path)) path /= "config.json";
  if (!std::filesystem::is_regular_file(path))
    throw InputError(name_or_path +
                     ": not a config preset (tiny), a config.json file nor a folder holding one");
  return ModelConfig::load(path);
}

}  // namespace dice::model
