// Checkpoint::open: single-file and sharded folders, tied embeddings, and every mismatch giving an
// error that names the file and the tensor.

#include "dice/model/checkpoint.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dice/core/error.h"
#include "dice/core/files.h"
#include "dice/model/random_checkpoint.h"
#include "test_util.h"

namespace dice::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempDir;

ModelConfig small_config() {
  ModelConfig c = tiny_config();
  c.vocab_size = 256;
  c.mask_token_id = 255;
  return c;
}

std::vector<TensorSpec> specs_of(const ModelConfig& c, DType dtype) {
  std::vector<TensorSpec> specs;
  for (const auto& [name, shape] : expected_tensors(c)) specs.push_back({name, dtype, shape});
  return specs;
}

// Writes config.json for `config` and `file` holding `specs`, every byte 0x3f.
void write_folder(const fs::path& dir, const ModelConfig& config,
                  const std::vector<TensorSpec>& specs,
                  const std::string& file = "model.safetensors") {
  fs::create_directories(dir);
  write_file_atomic(dir / "config.json", config.to_json().dump(2));
  SafetensorsWriter writer(dir / file, specs);
  for (const TensorSpec& s : specs) {
    const std::vector<std::byte> bytes(s.nbytes(), std::byte{0x3f});
    writer.append(bytes);
  }
  writer.finish();
}

std::string open_error(const fs::path& dir) {
  try {
    Checkpoint::open(dir);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void expect_mentions(const std::string& message, const std::vector<std::string>& words) {
  EXPECT_FALSE(message.empty()) << "no error";
  for (const std::string& w : words)
    EXPECT_NE(message.find(w), std::string::npos) << "'" << w << "' not in: " << message;
}

TEST(CheckpointTest, ExpectedTensorsFollowQwen3) {
  const ModelConfig c = tiny_config();
  const auto t = expected_tensors(c);
  ASSERT_EQ(t.size(), 1 + 2 * 11 + 2u);
  EXPECT_EQ(t.front().first, "model.embed_tokens.weight");
  EXPECT_EQ(t.front().second, (std::vector<std::int64_t>{151936, 64}));
  EXPECT_EQ(t[1].first, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(t[1].second, (std::vector<std::int64_t>{64, 64}));
  EXPECT_EQ(t[2].second, (std::vector<std::int64_t>{32, 64}));  // k_proj: 2 kv heads x 16
  EXPECT_EQ(t[4].second, (std::vector<std::int64_t>{64, 64}));  // o_proj
  EXPECT_EQ(t[5].first, "model.layers.0.self_attn.q_norm.weight");
  EXPECT_EQ(t[5].second, (std::vector<std::int64_t>{16}));
  EXPECT_EQ(t[9].second, (std::vector<std::int64_t>{64, 128}));  // down_proj
  EXPECT_EQ(t.back().first, "lm_head.weight");
  ModelConfig tied = c;
  tied.tie_word_embeddings = true;
  EXPECT_EQ(expected_tensors(tied).back().first, "model.norm.weight");
}

TEST(CheckpointTest, OpensSingleFileAndWidensToF32) {
  TempDir dir;
  const ModelConfig c = small_config();
  write_folder(dir.path(), c, specs_of(c, DType::kBF16));
  Checkpoint ck = Checkpoint::open(dir.path());
  EXPECT_EQ(ck.dir(), dir.path());
  EXPECT_EQ(ck.config().to_json(), c.to_json());
  EXPECT_EQ(ck.tensors().size(), expected_tensors(c).size());
  EXPECT_EQ(ck.files().size(), 1u);
  const TensorView& e = ck.tensor("model.embed_tokens.weight");
  EXPECT_EQ(e.dtype, DType::kBF16);
  EXPECT_EQ(e.shape, (std::vector<std::int64_t>{256, 64}));
  EXPECT_EQ(e.file, dir / "model.safetensors");
  const std::vector<float> v = e.to_f32();
  ASSERT_EQ(v.size(), 256u * 64u);
  EXPECT_EQ(v[0], bf16_to_f32(0x3f3f));
  EXPECT_TRUE(ck.contains("lm_head.weight"));
  EXPECT_FALSE(ck.contains("nope"));
  try {
    ck.tensor("nope");
    ADD_FAILURE();
  } catch (const InputError& err) {
    expect_mentions(err.what(), {dir.path().string(), "'nope'"});
  }
  // Moving keeps the views valid (the maps do not move).
  const Checkpoint moved = std::move(ck);
  EXPECT_EQ(moved.tensor("model.embed_tokens.weight").to_f32(), v);
}

TEST(CheckpointTest, TiedEmbeddingsNeedNoLmHead) {
  TempDir dir;
  ModelConfig c = small_config();
  c.tie_word_embeddings = true;
  write_folder(dir.path(), c, specs_of(c, DType::kF32));
  const Checkpoint ck = Checkpoint::open(dir.path());
  EXPECT_FALSE(ck.contains("lm_head.weight"));
  EXPECT_TRUE(ck.config().tie_word_embeddings);
}

TEST(CheckpointTest, MixedDtypesAndExtraTensorsOfOtherDtypes) {
  TempDir dir;
  const ModelConfig c = small_config();
  std::vector<TensorSpec> specs = specs_of(c, DType::kBF16);
  for (TensorSpec& s : specs)
    if (s.shape.size() == 1) s.dtype = DType::kF32;
  write_folder(dir.path(), c, specs);
  // Add an I64 tensor the model does not need, by rewriting the file by hand.
  const SafetensorsFile f = SafetensorsFile::open(dir / "model.safetensors");
  json header = json::object();
  std::string data;
  for (const TensorEntry& e : f.entries()) {
    header[e.name] = {{"dtype", e.dtype_name},
                      {"shape", e.shape},
                      {"data_offsets", {data.size(), data.size() + (e.end - e.begin)}}};
    const auto b = f.bytes(e);
    data.append(reinterpret_cast<const char*>(b.data()), b.size());
  }
  header["position_ids"] = {
      {"dtype", "I64"}, {"shape", {3}}, {"data_offsets", {data.size(), data.size() + 24}}};
  data.append(24, '\0');
  testing::write_bytes(dir / "model.safetensors", testing::safetensors_bytes(header.dump(), data));

  const Checkpoint ck = Checkpoint::open(dir.path());
  EXPECT_EQ(ck.tensor("model.norm.weight").dtype, DType::kF32);
  EXPECT_EQ(ck.tensor("lm_head.weight").dtype, DType::kBF16);
  EXPECT_FALSE(ck.contains("position_ids"));
  EXPECT_EQ(ck.files()[0].entries().size(), expected_tensors(c).size() + 1);
  try {
    ck.tensor("position_ids");
    ADD_FAILURE();
  } catch (const InputError& err) {
    expect_mentions(err.what(), {"'position_ids'", "I64"});
  }
}

TEST(CheckpointTest, MissingTensorAndWrongShapeNameFileAndTensor) {
  TempDir dir;
  const ModelConfig c = small_config();
  std::vector<TensorSpec> specs = specs_of(c, DType::kBF16);
  specs.pop_back();           // lm_head.weight
  specs[2].shape = {31, 64};  // model.layers.0.self_attn.k_proj.weight
  write_folder(dir.path(), c, specs);
  expect_mentions(
      open_error(dir.path()),
      {dir.path().string(), "2 problems", "'lm_head.weight'", "missing", "model.safetensors",
       "'model.layers.0.self_attn.k_proj.weight'", "[31, 64]", "expected [32, 64]"});
}

TEST(CheckpointTest, ExpectedTensorOfAnotherDtypeIsAnError) {
  TempDir dir;
  const ModelConfig c = small_config();
  std::vector<TensorSpec> specs = specs_of(c, DType::kF32);
  write_folder(dir.path(), c, specs);
  // Relabel model.norm.weight (F32, 64 values = 256 bytes) as I32 of the same size.
  std::string bytes = testing::slurp(dir / "model.safetensors");
  const std::size_t entry = bytes.find(R"("model.norm.weight":{)");
  ASSERT_NE(entry, std::string::npos);
  const std::size_t at = bytes.find(R"("dtype":"F32")", entry);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 13, R"("dtype":"I32")");
  testing::write_bytes(dir / "model.safetensors", bytes);
  expect_mentions(open_error(dir.path()), {"'model.norm.weight'", "dtype I32"});
}

TEST(CheckpointTest, ManyProblemsListTheFirstFew) {
  TempDir dir;
  const ModelConfig c = small_config();
  std::vector<TensorSpec> specs = specs_of(c, DType::kBF16);
  specs.resize(1);
  write_folder(dir.path(), c, specs);
  expect_mentions(open_error(dir.path()), {"24 problems", "and 19 more"});
}

TEST(CheckpointTest, FolderErrors) {
  TempDir dir;
  expect_mentions(open_error(dir / "absent"), {"absent", "not a model folder"});
  expect_mentions(open_error(dir.path()), {"no config.json"});
  write_file_atomic(dir / "config.json", small_config().to_json().dump());
  expect_mentions(open_error(dir.path()), {"no model.safetensors"});
  testing::write_bytes(dir / "model.safetensors", "short");
  expect_mentions(open_error(dir.path()), {(dir / "model.safetensors").string(), "truncated"});
}

// A sharded folder written by write_random_checkpoint with a small shard limit.
class ShardedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RandomCheckpointOptions options;
    options.max_shard_bytes = 40000;
    const RandomCheckpointResult r =
        write_random_checkpoint(dir.path(), small_config(), DType::kBF16, 7, options);
    ASSERT_GT(r.weight_files.size(), 2u);
    index = json::parse(testing::slurp(dir / "model.safetensors.index.json"));
  }
  void write_index() const {
    write_file_atomic(dir / "model.safetensors.index.json", index.dump(2));
  }
  TempDir dir;
  json index;
};

TEST_F(ShardedCheckpointTest, OpensAndMatchesTheSingleFileCheckpoint) {
  TempDir single;
  write_random_checkpoint(single.path(), small_config(), DType::kBF16, 7);
  ASSERT_TRUE(fs::exists(single / "model.safetensors"));
  const Checkpoint a = Checkpoint::open(dir.path());
  const Checkpoint b = Checkpoint::open(single.path());
  EXPECT_GT(a.files().size(), 2u);
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (const auto& [name, view] : a.tensors()) {
    const TensorView& other = b.tensor(name);
    ASSERT_EQ(view.data.size(), other.data.size()) << name;
    EXPECT_TRUE(std::equal(view.data.begin(), view.data.end(), other.data.begin())) << name;
    EXPECT_EQ(view.file.filename().string(), index["weight_map"][name].get<std::string>());
  }
}

TEST_F(ShardedCheckpointTest, MissingShardNamesIndexShardAndTensor) {
  const std::string shard = index["weight_map"]["model.norm.weight"].get<std::string>();
  fs::remove(dir / shard);
  expect_mentions(open_error(dir.path()),
                  {"model.safetensors.index.json", "shard '" + shard + "'", "missing", "tensor '"});
}

TEST_F(ShardedCheckpointTest, TensorMissingFromItsShardNamesBoth) {
  const std::string first = index["weight_map"]["model.embed_tokens.weight"].get<std::string>();
  const std::string other = index["weight_map"]["model.norm.weight"].get<std::string>();
  ASSERT_NE(first, other);
  index["weight_map"]["model.norm.weight"] = first;
  write_index();
  expect_mentions(open_error(dir.path()),
                  {"'model.norm.weight'", "shard '" + first + "'", "does not contain it"});
}

TEST_F(ShardedCheckpointTest, IndexWithoutWeightMapOrEscapingShard) {
  index["weight_map"]["model.norm.weight"] = "../outside.safetensors";
  write_index();
  expect_mentions(open_error(dir.path()), {"'model.norm.weight'", "not a file name"});
  index.erase("weight_map");
  write_index();
  expect_mentions(open_error(dir.path()), {"model.safetensors.index.json", "weight_map"});
  testing::write_bytes(dir / "model.safetensors.index.json", "{");
  expect_mentions(open_error(dir.path()), {"model.safetensors.index.json", "JSON"});
}

TEST_F(ShardedCheckpointTest, TensorDroppedFromIndexIsMissing) {
  index["weight_map"].erase("model.layers.1.mlp.up_proj.weight");
  write_index();
  expect_mentions(open_error(dir.path()), {"'model.layers.1.mlp.up_proj.weight'",
                                           "missing from model.safetensors.index.json"});
}

TEST_F(ShardedCheckpointTest, TruncatedShardNamesTheShard) {
  const std::string shard = index["weight_map"]["lm_head.weight"].get<std::string>();
  fs::resize_file(dir / shard, fs::file_size(dir / shard) - 100);
  expect_mentions(open_error(dir.path()),
                  {(dir / shard).string(), "'lm_head.weight'", "truncated"});
}

}  // namespace
}  // namespace dice::model
