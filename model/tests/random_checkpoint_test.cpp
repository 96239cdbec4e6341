// Random checkpoints: determinism, initialisation, sharding like save_pretrained, the files of a
// real model folder.

#include "dice/model/random_checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "dice/core/error.h"
#include "dice/model/checkpoint.h"
#include "test_util.h"

namespace dice::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempDir;

// Tiny with a vocabulary of 20000: the embedding (1.28M values) spans two generator chunks.
ModelConfig test_config() {
  ModelConfig c = tiny_config();
  c.vocab_size = 20000;
  c.mask_token_id = 19999;
  return c;
}

struct Stats {
  double mean = 0;
  double std = 0;
};

Stats stats(const std::vector<float>& v) {
  double sum = 0;
  double sq = 0;
  for (const float x : v) {
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(v.size());
  return {sum / n, std::sqrt(sq / n - (sum / n) * (sum / n))};
}

std::vector<std::string> folder_files(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(RandomCheckpointTest, SameSeedSameBytesWhateverTheThreads) {
  TempDir a;
  TempDir b;
  TempDir c;
  RandomCheckpointOptions one;
  one.threads = 1;
  RandomCheckpointOptions three;
  three.threads = 3;
  write_random_checkpoint(a.path(), test_config(), DType::kBF16, 42, one);
  write_random_checkpoint(b.path(), test_config(), DType::kBF16, 42, three);
  write_random_checkpoint(c.path(), test_config(), DType::kBF16, 43, three);
  EXPECT_EQ(folder_files(a.path()), folder_files(b.path()));
  for (const std::string& name : folder_files(a.path()))
    EXPECT_EQ(testing::slurp(a / name), testing::slurp(b / name)) << name;
  EXPECT_NE(testing::slurp(a / "model.safetensors"), testing::slurp(c / "model.safetensors"));
}

TEST(RandomCheckpointTest, InitialisationFollowsTheOptions) {
  TempDir dir;
  RandomCheckpointOptions options;
  options.init_std = 0.5;
  options.norm_noise_std = 0.1;
  write_random_checkpoint(dir.path(), test_config(), DType::kF32, 1, options);
  const Checkpoint ck = Checkpoint::open(dir.path());
  const Stats embed = stats(ck.tensor("model.embed_tokens.weight").to_f32());
  EXPECT_NEAR(embed.mean, 0.0, 0.005);
  EXPECT_NEAR(embed.std, 0.5, 0.005);
  const Stats q = stats(ck.tensor("model.layers.1.self_attn.q_proj.weight").to_f32());
  EXPECT_NEAR(q.std, 0.5, 0.03);
  std::vector<float> norms;
  for (const auto& [name, view] : ck.tensors())
    if (view.shape.size() == 1) {
      const std::vector<float> v = view.to_f32();
      norms.insert(norms.end(), v.begin(), v.end());
    }
  const Stats n = stats(norms);
  EXPECT_NEAR(n.mean, 1.0, 0.02);
  EXPECT_NEAR(n.std, 0.1, 0.02);
  // Different tensors get different values.
  EXPECT_NE(ck.tensor("model.layers.0.mlp.up_proj.weight").to_f32(),
            ck.tensor("model.layers.0.mlp.gate_proj.weight").to_f32());

  TempDir plain;
  options.norm_noise_std = 0.0;
  write_random_checkpoint(plain.path(), test_config(), DType::kF32, 1, options);
  for (const float v : Checkpoint::open(plain.path()).tensor("model.norm.weight").to_f32())
    EXPECT_EQ(v, 1.0f);
}

TEST(RandomCheckpointTest, Bf16AndF16AreTheF32ValuesRounded) {
  TempDir f32;
  TempDir bf16;
  TempDir f16;
  write_random_checkpoint(f32.path(), test_config(), DType::kF32, 5);
  write_random_checkpoint(bf16.path(), test_config(), DType::kBF16, 5);
  write_random_checkpoint(f16.path(), test_config(), DType::kF16, 5);
  const Checkpoint a = Checkpoint::open(f32.path());
  const Checkpoint b = Checkpoint::open(bf16.path());
  const Checkpoint h = Checkpoint::open(f16.path());
  EXPECT_EQ(json::parse(testing::slurp(bf16 / "config.json"))["torch_dtype"], "bfloat16");
  EXPECT_EQ(json::parse(testing::slurp(f16 / "config.json"))["torch_dtype"], "float16");
  for (const std::string name : {"model.embed_tokens.weight", "model.norm.weight"}) {
    const std::vector<float> x = a.tensor(name).to_f32();
    const std::vector<float> xb = b.tensor(name).to_f32();
    const std::vector<float> xh = h.tensor(name).to_f32();
    ASSERT_EQ(x.size(), xb.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(xb[i], bf16_to_f32(f32_to_bf16(x[i]))) << name << " " << i;
      ASSERT_EQ(xh[i], f16_to_f32(f32_to_f16(x[i]))) << name << " " << i;
    }
  }
}

TEST(RandomCheckpointTest, ValuesDependOnNameNotOnLayersOrShards) {
  TempDir one;
  TempDir two;
  ModelConfig c = test_config();
  c.num_layers = 1;
  write_random_checkpoint(one.path(), c, DType::kBF16, 9);
  RandomCheckpointOptions sharded;
  sharded.max_shard_bytes = 100000;
  write_random_checkpoint(two.path(), test_config(), DType::kBF16, 9, sharded);
  const Checkpoint a = Checkpoint::open(one.path());
  const Checkpoint b = Checkpoint::open(two.path());
  for (const std::string name :
       {"model.embed_tokens.weight", "model.layers.0.mlp.down_proj.weight", "lm_head.weight"}) {
    const auto& x = a.tensor(name).data;
    const auto& y = b.tensor(name).data;
    ASSERT_EQ(x.size(), y.size());
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin())) << name;
  }
}

TEST(RandomCheckpointTest, ShardsLikeSavePretrained) {
  TempDir dir;
  RandomCheckpointOptions options;
  options.max_shard_bytes = 100000;
  const RandomCheckpointResult r =
      write_random_checkpoint(dir.path(), test_config(), DType::kBF16, 3, options);
  const json index = json::parse(testing::slurp(dir / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"].get<std::uint64_t>(), r.tensor_bytes);
  EXPECT_EQ(index["weight_map"].size(), r.num_tensors);
  EXPECT_EQ(r.num_tensors, expected_tensors(test_config()).size());
  const std::size_t n = r.weight_files.size();
  ASSERT_GT(n, 2u);
  EXPECT_EQ(r.weight_files.front().filename().string(),
            "model-00001-of-0000" + std::to_string(n) + ".safetensors");
  std::uint64_t sum = 0;
  for (const fs::path& f : r.weight_files) {
    const SafetensorsFile file = SafetensorsFile::open(f);
    EXPECT_EQ(file.metadata().at("format"), "pt");
    std::uint64_t bytes = 0;
    for (const TensorEntry& e : file.entries()) bytes += e.end - e.begin;
    // A shard exceeds the limit only when it holds a single tensor larger than the limit.
    if (bytes > options.max_shard_bytes) {
      EXPECT_EQ(file.entries().size(), 1u) << f;
    }
    sum += bytes;
  }
  EXPECT_EQ(sum, r.tensor_bytes);
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
}

TEST(RandomCheckpointTest, WritesARealModelFolder) {
  TempDir tok;
  testing::write_bytes(tok / "tokenizer_config.json", "{}");
  testing::write_bytes(tok / "vocab.json", "{\"a\": 0}");
  testing::write_bytes(tok / "config.json", "not copied");
  TempDir dir;
  RandomCheckpointOptions options;
  options.tokenizer_dir = tok.path();
  ModelConfig c = test_config();
  c.tie_word_embeddings = true;
  const RandomCheckpointResult r = write_random_checkpoint(dir / "m", c, DType::kBF16, 0, options);
  EXPECT_EQ(folder_files(dir / "m"),
            (std::vector<std::string>{"config.json", "model.safetensors", "tokenizer_config.json",
                                      "vocab.json"}));
  EXPECT_EQ(r.copied_files.size(), 2u);
  const json config = json::parse(testing::slurp(dir / "m" / "config.json"));
  EXPECT_EQ(config["model_type"], "sdar");
  EXPECT_EQ(config["tie_word_embeddings"], true);
  EXPECT_EQ(ModelConfig::from_json(config, "written").to_json()["vocab_size"], 20000);
  EXPECT_FALSE(Checkpoint::open(dir / "m").contains("lm_head.weight"));

  // A non-empty folder is refused; overwrite replaces the weights (stale shards go).
  EXPECT_THROW(write_random_checkpoint(dir / "m", c, DType::kBF16, 0), InputError);
  RandomCheckpointOptions again;
  again.overwrite = true;
  again.max_shard_bytes = 100000;
  write_random_checkpoint(dir / "m", c, DType::kBF16, 0, again);
  EXPECT_FALSE(fs::exists(dir / "m" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "m" / "vocab.json"));
  EXPECT_NO_THROW(Checkpoint::open(dir / "m"));

  RandomCheckpointOptions bad;
  bad.tokenizer_dir = tok / "absent";
  EXPECT_THROW(write_random_checkpoint(dir / "n", c, DType::kBF16, 0, bad), InputError);
  ModelConfig invalid = c;
  invalid.num_kv_heads = 3;
  EXPECT_THROW(write_random_checkpoint(dir / "o", invalid, DType::kBF16, 0), InputError);
}

}  // namespace
}  // namespace dice::model
