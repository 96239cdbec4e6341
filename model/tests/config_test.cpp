// ModelConfig: the shared SDAR configs, round trips, and every validation error naming its input.

#include "dice/model/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "dice/core/error.h"
#include "test_util.h"

namespace dice::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kConfigs =
    fs::path(DICE_SOURCE_DIR) / ".." / "shared" / "models" / "sdar" / "configs";

json tiny_json() {
  return tiny_config().to_json();
}

// The message of the InputError `f` throws ("" if none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigTest, SharedSdarConfigsHaveTheirTableValues) {
  if (!fs::exists(kConfigs)) GTEST_SKIP() << "shared SDAR configs absent: " << kConfigs;
  struct Row {
    const char* file;
    std::int64_t hidden, layers, heads, kv, inter;
  };
  for (const Row& r : {Row{"sdar-1.7b-chat.json", 2048, 28, 16, 8, 6144},
                       Row{"sdar-4b-chat.json", 2560, 36, 32, 8, 9728},
                       Row{"sdar-8b-chat.json", 4096, 36, 32, 8, 12288}}) {
    const ModelConfig c = ModelConfig::load(kConfigs / r.file);
    EXPECT_EQ(c.hidden_size, r.hidden) << r.file;
    EXPECT_EQ(c.num_layers, r.layers) << r.file;
    EXPECT_EQ(c.num_heads, r.heads) << r.file;
    EXPECT_EQ(c.num_kv_heads, r.kv) << r.file;
    EXPECT_EQ(c.intermediate_size, r.inter) << r.file;
    EXPECT_EQ(c.head_dim, 128);
    EXPECT_EQ(c.vocab_size, 151936);
    EXPECT_EQ(c.rope_theta, 1e6);
    EXPECT_EQ(c.rms_norm_eps, 1e-6);
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_EQ(c.block_size, 4);
    EXPECT_EQ(c.mask_token_id, 151669);
  }
}

TEST(ConfigTest, ToJsonHasTheKeysOfTheSharedConfigsAndRoundTrips) {
  if (!fs::exists(kConfigs)) GTEST_SKIP() << "shared SDAR configs absent: " << kConfigs;
  // The 1.7B config has exactly the keys every SDAR config shares (4B and 8B add training keys).
  for (const char* file : {"sdar-1.7b-chat.json", "sdar-4b-chat.json", "sdar-8b-chat.json"}) {
    SCOPED_TRACE(file);
    const json shared = json::parse(testing::slurp(kConfigs / file));
    const json out = ModelConfig::from_json(shared, file).to_json();
    for (const auto& [key, value] : out.items()) {
      ASSERT_TRUE(shared.contains(key)) << key;
      if (value.is_number())
        EXPECT_DOUBLE_EQ(value.get<double>(), shared[key].get<double>()) << key;
      else
        EXPECT_EQ(value, shared[key]) << key;
    }
    if (std::string(file) == "sdar-1.7b-chat.json") {
      EXPECT_EQ(out.size(), shared.size());
    }
    EXPECT_EQ(ModelConfig::from_json(out, "round trip").to_json(), out);
  }
}

TEST(ConfigTest, TinyPreset) {
  const ModelConfig c = config_preset("tiny");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.block_size, 4);
  const std::string e = error_of([] { config_preset("no/such/config.json"); });
  EXPECT_NE(e.find("no/such/config.json"), std::string::npos) << e;
}

TEST(ConfigTest, MissingFieldNamesSourceAndField) {
  json j = tiny_json();
  j.erase("num_key_value_heads");
  const std::string e = error_of([&] { ModelConfig::from_json(j, "my.json"); });
  EXPECT_NE(e.find("my.json"), std::string::npos) << e;
  EXPECT_NE(e.find("num_key_value_heads"), std::string::npos) << e;
}

TEST(ConfigTest, WrongTypesAndRangesAreErrors) {
  const auto expect_error = [](const json& j, const std::string& word) {
    const std::string e = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_NE(e.find("cfg.json"), std::string::npos) << j.dump();
    EXPECT_NE(e.find(word), std::string::npos) << "message: " << e;
  };
  json j = tiny_json();
  j["hidden_size"] = "64";
  expect_error(j, "hidden_size");
  j = tiny_json();
  j["hidden_size"] = 64.5;
  expect_error(j, "hidden_size");
  j = tiny_json();
  j["num_hidden_layers"] = 0;
  expect_error(j, "num_hidden_layers");
  j = tiny_json();
  j["num_attention_heads"] = 3;
  expect_error(j, "multiple");
  j = tiny_json();
  j["tie_word_embeddings"] = 1;
  expect_error(j, "tie_word_embeddings");
  j = tiny_json();
  j["mask_token_id"] = 200000;
  expect_error(j, "mask_token_id");
  j = tiny_json();
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  expect_error(j, "rope_scaling");
  j = tiny_json();
  j["attention_bias"] = true;
  expect_error(j, "attention_bias");
  j = tiny_json();
  j["hidden_act"] = "gelu";
  expect_error(j, "hidden_act");
  j = tiny_json();
  j["rms_norm_eps"] = -1.0;
  expect_error(j, "rms_norm_eps");
  expect_error(json::array(), "object");
}

TEST(ConfigTest, AcceptsTransformers5Keys) {
  // What transformers 5 writes for a Qwen3 model: rope_parameters and layer_types.
  json j = tiny_json();
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j.erase("block_size");
  j.erase("mask_token_id");
  j["rope_parameters"] = {{"rope_theta", 10000.0}, {"rope_type", "default"}};
  j["layer_types"] = {"full_attention", "full_attention"};
  j["model_type"] = "qwen3";
  const ModelConfig c = ModelConfig::from_json(j, "qwen3");
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.block_size, 4);
  EXPECT_EQ(c.mask_token_id, 151669);
  j["layer_types"] = {"full_attention", "sliding_attention"};
  EXPECT_THROW(ModelConfig::from_json(j, "qwen3"), InputError);
  j["layer_types"] = {"full_attention", "full_attention"};
  j["rope_parameters"]["rope_type"] = "yarn";
  EXPECT_THROW(ModelConfig::from_json(j, "qwen3"), InputError);
}

TEST(ConfigTest, LoadNamesTheFile) {
  testing::TempDir dir;
  testing::write_bytes(dir / "config.json", "{\"hidden_size\": ");
  const std::string e = error_of([&] { ModelConfig::load(dir / "config.json"); });
  EXPECT_NE(e.find((dir / "config.json").string()), std::string::npos) << e;
  EXPECT_NE(e.find("JSON"), std::string::npos) << e;
  const std::string missing = error_of([&] { ModelConfig::load(dir / "absent.json"); });
  EXPECT_NE(missing.find("absent.json"), std::string::npos) << missing;
}

}  // namespace
}  // namespace dice::model
