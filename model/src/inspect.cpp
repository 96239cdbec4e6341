// Descriptions of a checkpoint for `dice model inspect`.

#include "dice/model/inspect.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "dice/model/safetensors.h"

namespace dice::model {

using nlohmann::json;

namespace {

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

}  // namespace

json describe_json(const Checkpoint& checkpoint) {
  json tensors = json::array();
  std::uint64_t total = 0;
  std::int64_t parameters = 0;
  for (const SafetensorsFile& file : checkpoint.files()) {
    for (const TensorEntry& e : file.entries()) {
      tensors.push_back({{"name", e.name},
                         {"dtype", e.dtype_name},
                         {"shape", e.shape},
                         {"file", file.path().filename().string()},
                         {"offset", file.data_offset() + e.begin},
                         {"bytes", e.end - e.begin}});
      total += e.end - e.begin;
      parameters += numel(e.shape);
    }
  }
  return json{{"dir", checkpoint.dir().string()},
              {"config", checkpoint.config().to_json()},
              {"files", checkpoint.files().size()},
              {"num_parameters", parameters},
              {"total_bytes", total},
              {"tensors", std::move(tensors)}};
}

std::string describe_text(const Checkpoint& checkpoint) {
  const ModelConfig& c = checkpoint.config();
  const json d = describe_json(checkpoint);
  std::string out = fmt::format("{}\n", checkpoint.dir().string());
  out += fmt::format(
      "  hidden {}, layers {}, heads {} / kv heads {} (head dim {}), intermediate {}, vocab {}\n",
      c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size,
      c.vocab_size);
  out += fmt::format(
      "  rope_theta {:g}, rms_norm_eps {:g}, tie_word_embeddings {}, block_size {}, "
      "mask_token_id {}, max_position_embeddings {}\n",
      c.rope_theta, c.rms_norm_eps, c.tie_word_embeddings, c.block_size, c.mask_token_id,
      c.max_position_embeddings);
  out += fmt::format("  {} tensors, {} parameters, {} bytes in {} file(s)\n\n", d["tensors"].size(),
                     d["num_parameters"].get<std::int64_t>(), d["total_bytes"].get<std::uint64_t>(),
                     checkpoint.files().size());
  std::size_t name_width = 4;
  std::size_t shape_width = 5;
  for (const json& t : d["tensors"]) {
    name_width = std::max(name_width, t["name"].get<std::string>().size());
    shape_width =
        std::max(shape_width, shape_text(t["shape"].get<std::vector<std::int64_t>>()).size());
  }
  out += fmt::format("{:<{}}  {:<5}  {:<{}}  {}\n", "name", name_width, "dtype", "shape",
                     shape_width, "file");
  for (const json& t : d["tensors"])
    out += fmt::format("{:<{}}  {:<5}  {:<{}}  {}\n", t["name"].get<std::string>(), name_width,
                       t["dtype"].get<std::string>(),
                       shape_text(t["shape"].get<std::vector<std::int64_t>>()), shape_width,
                       t["file"].get<std::string>());
  return out;
}

}  // namespace dice::model
