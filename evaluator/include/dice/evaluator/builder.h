#pragma once
// Builds candidates' inline CUDA/C++ extensions on the CPU into a content-addressed cache: the
// same sources, flags and toolchain give the same artifact, built once.

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <semaphore>
#include <string>
#include <vector>

#include "dice/evaluator/toolchain.h"

namespace dice::eval {

/// One `load_inline(...)` call of a candidate, as recorded by `dice_worker capture`
/// (evaluator/PROTOCOL.md).
struct ExtensionSpec {
  std::string digest;  ///< the worker's key of this call
  std::string name;
  std::string cpp_sources;
  std::string cuda_sources;
  nlohmann::json functions;  ///< null, list of names, or object name -> docstring
  std::vector<std::string> extra_cflags, extra_cuda_cflags, extra_ldflags, extra_include_paths;
  bool with_cuda = true;

  /// Parses a capture record. Throws dice::Error naming the missing field.
  static ExtensionSpec from_json(const nlohmann::json& j);
};

/// The outcome of building one extension.
struct BuildResult {
  bool ok = false;
  bool cached = false;  ///< served from the cache, nothing compiled
  bool timed_out = false;
  std::string key;                    ///< SHA-256 of sources, flags, arch and toolchain
  std::filesystem::path module_path;  ///< the .so when ok
  std::string log_tail;               ///< compiler output, last bytes
  double seconds = 0.0;               ///< wall time of this call
};

struct BuildOptions {
  std::filesystem::path cache_dir;    ///< artifacts in cache_dir/ext/<key>/
  std::string arch = "sm_90";         ///< target: sm_XY or sm_XYa
  int jobs = 1;                       ///< compiler processes at once, over all threads
  std::chrono::seconds timeout{600};  ///< per compiler process
};

/// Builds extensions the way torch.utils.cpp_extension.load_inline would (main.cpp with the
/// pybind11 bindings of `functions`, cuda.cu with the CUDA sources), with our compilers, in
/// parallel and cached. Thread-safe: concurrent builds of one key wait for the first.
class ExtensionBuilder {
 public:
  ExtensionBuilder(Toolchain toolchain, BuildOptions options);

  /// Builds `spec` or serves it from the cache. Compile errors and time-outs are results, not
  /// exceptions; throws dice::Error only if the cache folder cannot be written.
  BuildResult build(const ExtensionSpec& spec);

  /// The cache key of `spec` under this builder's toolchain and arch.
  std::string key(const ExtensionSpec& spec) const;

  /// "-gencode=arch=compute_90,code=sm_90" for "sm_90". Throws dice::InputError on a bad arch.
  static std::string gencode_flag(const std::string& arch);

 private:
  BuildResult build_uncached(const ExtensionSpec& spec, const std::string& key);

  Toolchain toolchain_;
  BuildOptions options_;
  std::string fingerprint_;
  std::counting_semaphore<> compiler_slots_;
  std::mutex mutex_;
  std::condition_variable done_;
  std::map<std::string, bool> in_flight_;
};

}  // namespace dice::eval
