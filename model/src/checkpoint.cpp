// Opening a Hugging Face model folder: config.json, model.safetensors or the shards named by
// model.safetensors.index.json, checked against the tensors an SDAR model needs (system.md §2).

#include "dice/model/checkpoint.h"

#include <set>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "dice/core/error.h"
#include "dice/core/files.h"

namespace dice::model {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

}  // namespace

std::vector<std::pair<std::string, std::vector<std::int64_t>>> expected_tensors(
    const ModelConfig& c) {
  const std::int64_t q = c.num_heads * c.head_dim;
  const std::int64_t kv = c.num_kv_heads * c.head_dim;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
  out.emplace_back("model.embed_tokens.weight", std::vector{c.vocab_size, c.hidden_size});
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    out.emplace_back(p + "self_attn.q_proj.weight", std::vector{q, c.hidden_size});
    out.emplace_back(p + "self_attn.k_proj.weight", std::vector{kv, c.hidden_size});
    out.emplace_back(p + "self_attn.v_proj.weight", std::vector{kv, c.hidden_size});
    out.emplace_back(p + "self_attn.o_proj.weight", std::vector{c.hidden_size, q});
    out.emplace_back(p + "self_attn.q_norm.weight", std::vector{c.head_dim});
    out.emplace_back(p + "self_attn.k_norm.weight", std::vector{c.head_dim});
    out.emplace_back(p + "mlp.gate_proj.weight", std::vector{c.intermediate_size, c.hidden_size});
    out.emplace_back(p + "mlp.up_proj.weight", std::vector{c.intermediate_size, c.hidden_size});
    out.emplace_back(p + "mlp.down_proj.weight", std::vector{c.hidden_size, c.intermediate_size});
    out.emplace_back(p + "input_layernorm.weight", std::vector{c.hidden_size});
    out.emplace_back(p + "post_attention_layernorm.weight", std::vector{c.hidden_size});
  }
  out.emplace_back("model.norm.weight", std::vector{c.hidden_size});
  if (!c.tie_word_embeddings)
    out.emplace_back("lm_head.weight", std::vector{c.vocab_size, c.hidden_size});
  return out;
}

struct Checkpoint::State {
  fs::path dir;
  ModelConfig config;
  std::vector<SafetensorsFile> files;
  std::map<std::string, TensorView> tensors;
  std::map<std::string, const TensorEntry*> unsupported;  ///< named tensors of other dtypes
};

Checkpoint::Checkpoint(std::unique_ptr<State> state) : state_(std::move(state)) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

const fs::path& Checkpoint::dir() const {
  return state_->dir;
}
const ModelConfig& Checkpoint::config() const {
  return state_->config;
}
const std::map<std::string, TensorView>& Checkpoint::tensors() const {
  return state_->tensors;
}
const std::vector<SafetensorsFile>& Checkpoint::files() const {
  return state_->files;
}
bool Checkpoint::contains(const std::string& name) const {
  return state_->tensors.contains(name);
}

const TensorView& Checkpoint::tensor(const std::string& name) const {
  const auto it = state_->tensors.find(name);
  if (it != state_->tensors.end()) return it->second;
  if (const auto u = state_->unsupported.find(name); u != state_->unsupported.end())
    throw InputError(state_->dir.string() + ": tensor '" + name + "' has dtype " +
                     u->second->dtype_name + ", not one dice computes with (F32, F16, BF16)");
  throw InputError(state_->dir.string() + ": no tensor '" + name + "'");
}

Checkpoint Checkpoint::open(const fs::path& dir) {
  if (!fs::is_directory(dir))
    throw InputError(dir.string() + ": not a model folder (no such directory)");
  auto state = std::make_unique<State>();
  state->dir = dir;
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path))
    throw InputError(dir.string() + ": no config.json: not a Hugging Face model folder");
  state->config = ModelConfig::load(config_path);

  // Adds the tensor `entry` of the file last opened as `name`.
  const auto add = [&](const std::string& name, const SafetensorsFile& file,
                       const TensorEntry& entry) {
    if (entry.dtype)
      state->tensors.insert_or_assign(name, file.view(entry));
    else
      state->unsupported.insert_or_assign(name, &entry);
  };

  const fs::path single = dir / kSingleFile;
  const fs::path index_path = dir / kIndexFile;
  if (fs::exists(single)) {
    state->files.push_back(SafetensorsFile::open(single));
    for (const TensorEntry& e : state->files.back().entries()) add(e.name, state->files.back(), e);
  } else if (fs::exists(index_path)) {
    const std::string where = index_path.string() + ": ";
    json index;
    try {
      index = json::parse(read_file(index_path));
    } catch (const json::parse_error& e) {
      throw InputError(where + "not valid JSON: " + e.what());
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      throw InputError(where + "no \"weight_map\" object (tensor name -> shard file)");
    // shard file -> the first tensor it is named for (for messages), in name order.
    std::map<std::string, std::string> shards;
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
      if (!shard.is_string())
        throw InputError(where + "tensor '" + tensor + "' maps to " + shard.dump() +
                         ", not a file name");
      const std::string file = shard.get<std::string>();
      if (file.empty() || fs::path(file).filename().string() != file || file == "." || file == "..")
        throw InputError(where + "tensor '" + tensor + "' maps to '" + file +
                         "', not a file name inside the folder");
      shards.emplace(file, tensor);
    }
    std::map<std::string, std::size_t> file_index;
    state->files.reserve(shards.size());
    for (const auto& [file, tensor] : shards) {
      const fs::path path = dir / file;
      if (!fs::exists(path))
        throw InputError(where + "shard '" + file + "' (named for tensor '" + tensor +
                         "') is missing: no " + path.string());
      state->files.push_back(SafetensorsFile::open(path));
      file_index[file] = state->files.size() - 1;
    }
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
      const SafetensorsFile& file = state->files[file_index.at(shard.get<std::string>())];
      const TensorEntry* entry = file.find(tensor);
      if (entry == nullptr)
        throw InputError(where + "tensor '" + tensor + "' is mapped to shard '" +
                         shard.get<std::string>() + "', but " + file.path().string() +
                         " does not contain it");
      add(tensor, file, *entry);
    }
  } else {
    throw InputError(dir.string() + ": no " + kSingleFile + " nor " + kIndexFile);
  }

  const std::string missing_from = fs::exists(single) ? kSingleFile : kIndexFile;
  std::vector<std::string> problems;
  for (const auto& [name, shape] : expected_tensors(state->config)) {
    if (const auto u = state->unsupported.find(name); u != state->unsupported.end()) {
      problems.push_back("tensor '" + name + "' has dtype " + u->second->dtype_name +
                         " (expected F32, F16 or BF16)");
      continue;
    }
    const auto it = state->tensors.find(name);
    if (it == state->tensors.end()) {
      problems.push_back("tensor '" + name + "' " + shape_text(shape) + " is missing from " +
                         missing_from);
    } else if (it->second.shape != shape) {
      problems.push_back("tensor '" + name + "' in " + it->second.file.filename().string() +
                         " has shape " + shape_text(it->second.shape) + ", expected " +
                         shape_text(shape));
    }
  }
  if (!problems.empty()) {
    constexpr std::size_t kShown = 5;
    std::string message = dir.string() + ": the weights do not match config.json (" +
                          std::to_string(problems.size()) + " problem" +
                          (problems.size() > 1 ? "s" : "") + "): ";
    for (std::size_t i = 0; i < problems.size() && i < kShown; ++i)
      message += (i > 0 ? "; " : "") + problems[i];
    if (problems.size() > kShown)
      message += "; and " + std::to_string(problems.size() - kShown) + " more";
    throw InputError(message);
  }
  return Checkpoint(std::move(state));
}

}  // namespace dice::model
