// Random SDAR checkpoints, generated and written as a stream (a few chunks in memory at a time).

#include "dice/model/random_checkpoint.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <deque>
#include <future>
#include <numbers>
#include <string_view>
#include <system_error>
#include <thread>

#include <nlohmann/json.hpp>

#include "dice/core/error.h"
#include "dice/core/files.h"
#include "dice/model/checkpoint.h"
#include "dice/model/safetensors.h"

namespace dice::model {

namespace fs = std::filesystem;
using nlohmann::json;

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; dice writes host bytes");

namespace {

constexpr std::uint64_t kChunkElements = std::uint64_t{1} << 20;

// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", 2014).
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() { return mix64(state += 0x9e3779b97f4a7c15ull); }
};

// FNV-1a, 64 bits: a stable hash of a tensor name.
std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

bool is_norm(std::string_view name) {
  return name.ends_with("norm.weight");
}

// One chunk of random values of one tensor, already in the checkpoint's dtype.
struct Job {
  const TensorSpec* spec;
  std::uint64_t chunk;
};

std::vector<std::byte> generate_chunk(const Job& job, std::uint64_t seed,
                                      const RandomCheckpointOptions& options) {
  const TensorSpec& spec = *job.spec;
  const std::uint64_t numel = spec.nbytes() / dtype_size(spec.dtype);
  const std::uint64_t first = job.chunk * kChunkElements;
  const auto count = static_cast<std::size_t>(std::min(kChunkElements, numel - first));
  const bool norm = is_norm(spec.name);
  const double mean = norm ? 1.0 : 0.0;
  const double std_dev = norm ? options.norm_noise_std : options.init_std;
  SplitMix64 rng{mix64(mix64(seed) ^ fnv1a(spec.name)) ^ mix64(job.chunk + 0x5851f42d4c957f2dull)};

  std::vector<float> values(count);
  const auto mean_f = static_cast<float>(mean);
  const auto std_f = static_cast<float>(std_dev);
  constexpr float kUnit = 1.0f / 16777216.0f;  // 2^-24
  constexpr float kTwoPi = 2.0f * std::numbers::pi_v<float>;
  for (std::size_t i = 0; i < count; i += 2) {
    // Box-Muller in fp32, one 64-bit draw per pair: u1 in (0, 1], u2 in [0, 1), 24 bits each
    // (so |z| <= 5.77, plenty for weights; fp32 math is twice as fast as fp64 here).
    const std::uint64_t bits = rng.next();
    const float u1 = static_cast<float>((bits >> 40) + 1) * kUnit;
    const float u2 = static_cast<float>(bits & 0xffffffu) * kUnit;
    const float r = std_f * std::sqrt(-2.0f * std::log(u1));
    const float theta = kTwoPi * u2;
    values[i] = mean_f + r * std::cos(theta);
    if (i + 1 < count) values[i + 1] = mean_f + r * std::sin(theta);
  }

  std::vector<std::byte> bytes(count * dtype_size(spec.dtype));
  switch (spec.dtype) {
    case DType::kF32:
      std::memcpy(bytes.data(), values.data(), bytes.size());
      break;
    case DType::kBF16:
      for (std::size_t i = 0; i < count; ++i) {
        const std::uint16_t b = f32_to_bf16(values[i]);
        std::memcpy(bytes.data() + 2 * i, &b, 2);
      }
      break;
    case DType::kF16:
      for (std::size_t i = 0; i < count; ++i) {
        const std::uint16_t b = f32_to_f16(values[i]);
        std::memcpy(bytes.data() + 2 * i, &b, 2);
      }
      break;
  }
  return bytes;
}

bool is_weight_file(const fs::path& p) {
  const std::string name = p.filename().string();
  return name == "config.json" || name == "model.safetensors.index.json" ||
         p.extension() == ".safetensors" || name.ends_with(".safetensors.tmp");
}

// Creates `dir`, or clears the files a model folder's weights consist of when `overwrite`.
void prepare_folder(const fs::path& dir, bool overwrite) {
  std::error_code ec;
  if (fs::exists(dir)) {
    if (!fs::is_directory(dir)) throw InputError(dir.string() + ": exists and is not a folder");
    if (!fs::is_empty(dir)) {
      if (!overwrite)
        throw InputError(
            dir.string() +
            ": exists and is not empty (dice model random --force replaces its weights)");
      for (const auto& entry : fs::directory_iterator(dir))
        if (entry.is_regular_file() && is_weight_file(entry.path())) fs::remove(entry.path());
    }
  } else if (!fs::create_directories(dir, ec) && ec) {
    throw Error(dir.string() + ": cannot create: " + ec.message());
  }
}

}  // namespace

RandomCheckpointResult write_random_checkpoint(const fs::path& dir, const ModelConfig& config,
                                               DType dtype, std::uint64_t seed,
                                               const RandomCheckpointOptions& options) {
  config.validate("random checkpoint config");
  if (!(options.init_std >= 0.0) || !(options.norm_noise_std >= 0.0))
    throw InputError("random checkpoint: init_std and norm_noise_std must be >= 0");
  if (options.max_shard_bytes == 0)
    throw InputError("random checkpoint: max_shard_bytes must be positive");
  if (options.tokenizer_dir && !fs::is_directory(*options.tokenizer_dir))
    throw InputError(options.tokenizer_dir->string() + ": tokenizer folder does not exist");
  prepare_folder(dir, options.overwrite);

  std::vector<TensorSpec> specs;
  for (auto& [name, shape] : expected_tensors(config)) specs.push_back({name, dtype, shape});

  // Shards as save_pretrained makes them: tensors in order, a new shard when the next tensor
  // would take the current one past the limit.
  std::vector<std::vector<TensorSpec>> shards(1);
  std::uint64_t shard_bytes = 0;
  RandomCheckpointResult result;
  for (TensorSpec& spec : specs) {
    const std::uint64_t n = spec.nbytes();
    if (!shards.back().empty() && shard_bytes + n > options.max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shard_bytes += n;
    result.tensor_bytes += n;
    shards.back().push_back(std::move(spec));
  }
  result.num_tensors = specs.size();

  const unsigned threads =
      options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  json weight_map = json::object();
  for (std::size_t s = 0; s < shards.size(); ++s) {
    std::string file = "model.safetensors";
    if (shards.size() > 1) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
      file = name;
    }
    std::vector<Job> jobs;
    for (const TensorSpec& spec : shards[s]) {
      weight_map[spec.name] = file;
      const std::uint64_t numel = spec.nbytes() / dtype_size(dtype);
      for (std::uint64_t c = 0; c * kChunkElements < numel; ++c) jobs.push_back({&spec, c});
    }
    SafetensorsWriter writer(dir / file, shards[s]);
    std::deque<std::future<std::vector<std::byte>>> in_flight;
    for (const Job& job : jobs) {
      if (in_flight.size() >= threads) {
        writer.append(in_flight.front().get());
        in_flight.pop_front();
      }
      in_flight.push_back(
          std::async(std::launch::async, generate_chunk, job, seed, std::cref(options)));
    }
    for (auto& f : in_flight) writer.append(f.get());
    writer.finish();
    result.weight_files.push_back(dir / file);
  }
  if (shards.size() > 1) {
    const json index{{"metadata", {{"total_size", result.tensor_bytes}}},
                     {"weight_map", weight_map}};
    write_file_atomic(dir / "model.safetensors.index.json", index.dump(2) + "\n");
  }

  if (options.tokenizer_dir) {
    for (const auto& entry : fs::directory_iterator(*options.tokenizer_dir)) {
      if (!entry.is_regular_file() || is_weight_file(entry.path())) continue;
      const fs::path target = dir / entry.path().filename();
      std::error_code ec;
      fs::copy_file(entry.path(), target, fs::copy_options::overwrite_existing, ec);
      if (!ec)  // the source may be read-only; the copy must stay replaceable
        fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write,
                        fs::perm_options::add, ec);
      if (ec)
        throw Error(target.string() + ": cannot copy from " + entry.path().string() + ": " +
                    ec.message());
      result.copied_files.push_back(target);
    }
  }
  // config.json last: a folder interrupted before this point is not mistaken for a model.
  json config_json = config.to_json();
  config_json["torch_dtype"] = torch_dtype_name(dtype);
  write_file_atomic(dir / "config.json", config_json.dump(2) + "\n");
  return result;
}

}  // namespace dice::model
