#pragma once
// Builds candidates' inline CUDA/C++ extensions on the CPU into content-addressed caches: objects
// (main.o keyed by its own inputs, cuda.o by its own) and linked modules. The same sources, flags
// and toolchain give the same artifact, built once; main.cpp and cuda.cu compiles first try a
// slim header in place of torch's umbrella headers, and main.cpp's header is precompiled.

#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <semaphore>
#include <string>
#include <string_view>
#include <vector>

#include "dice/core/keyed_mutex.h"
#include "dice/evaluator/pch.h"
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

/// How one object file of a build was obtained.
struct ObjectOutcome {
  std::string status = "none";  ///< none (not needed), built, cached, failed, timeout
  bool pch = false;             ///< main.cpp: compiled with the precompiled header
  std::string compiler;         ///< the compiler that produced the verdict (main.cpp)
  /// The torch headers the verdict was compiled with: "slim" (cuda.cu with dice_torch_cuda.h,
  /// main.cpp with dice_torch_main.h), "full" (torch's own headers), or "" when unknown (served
  /// from an older cache entry) or none.
  std::string header;
  double seconds = 0.0;      ///< compile wall time when built here
  double cpu_seconds = 0.0;  ///< CPU time of the compiler processes (user + system)
};

/// The outcome of building one extension.
struct BuildResult {
  bool ok = false;
  bool cached = false;  ///< the linked module came from the cache, nothing compiled or linked
  bool timed_out = false;
  std::string key;                    ///< SHA-256 of sources, flags, arch and toolchain
  std::string main_key;               ///< key of main.o (also names the module)
  std::string cuda_key;               ///< key of cuda.o; empty without CUDA sources
  std::filesystem::path module_path;  ///< the .so when ok
  std::string log_tail;               ///< compiler output, last bytes
  double seconds = 0.0;               ///< wall time of this call
  ObjectOutcome main, cuda;           ///< per object; both "cached" when `cached`
  double link_seconds = 0.0;
  double link_cpu_seconds = 0.0;
};

struct BuildOptions {
  std::filesystem::path cache_dir;    ///< modules in cache_dir/ext/<key>/, objects in obj/, pch/
  std::string arch = "sm_90";         ///< target: sm_XY or sm_XYa
  int jobs = 1;                       ///< compiler processes at once, over all threads
  std::chrono::seconds timeout{600};  ///< per compiler process
  bool pch = true;                    ///< main.cpp with its header precompiled
  /// The compiler of main.cpp: "auto" (clang++ when it runs, else the toolchain's C++ compiler),
  /// "cxx" (the toolchain's), or a program name or path. A main.cpp that fails with another
  /// compiler than the toolchain's, or with the precompiled header, is compiled again plainly
  /// with the toolchain's compiler, whose result decides.
  std::string main_compiler = "auto";
  /// cuda.cu and main.cpp first with the slim headers (slim_cuda_source, slim_main_source) in
  /// place of torch's umbrella headers; a source that fails so is compiled again as torch writes
  /// it, and that compile decides.
  bool slim_headers = true;
};

/// The text of dice_torch_cuda.h (evaluator/share/): the part of torch's C++ API that CUDA halves
/// of candidates use (at::Tensor, the factory functions, AT_DISPATCH_*, TORCH_CHECK, torch::
/// aliases of them), from headers that <torch/extension.h> itself includes.
std::string_view slim_cuda_header();

/// The CUDA half of `spec` as compiled with the slim header: `#include "dice_torch_cuda.h"` (in
/// place of torch load_inline's `#include <torch/types.h>`, <cuda.h> and <cuda_runtime.h>), then
/// the CUDA sources with every line that is only an include of an umbrella header
/// (<torch/extension.h>, <torch/torch.h>, <torch/all.h>, <torch/types.h>, in <> or "", optionally
/// followed by a // comment) turned into a comment; line numbers are kept. std::nullopt when the
/// sources mention `requires_grad` (the slim torch::empty & co. are ATen's, which do not make
/// tensors that require grad).
std::optional<std::string> slim_cuda_source(const ExtensionSpec& spec);

/// The text of dice_torch_main.h, the slim header of C++ halves: dice_torch_cuda.h without CUDA's
/// headers, then torch/csrc/Exceptions.h (torch::wrap_pybind_function) and
/// torch/csrc/utils/pybind.h (pybind11 and its at::Tensor casters), both of which
/// <torch/extension.h> includes. Parsing and instantiating it costs about a third of
/// <torch/extension.h> (bench/results/2026-11-23-compile-main-cpu).
std::string slim_main_header();

/// The C++ half of `spec` as compiled with the slim header: `#include "dice_torch_main.h"` in place
/// of load_inline's `#include <torch/extension.h>`, the C++ sources with their umbrella includes
/// commented out (as slim_cuda_source), then the pybind11 module of `functions`. std::nullopt
/// when the sources mention `requires_grad`.
std::optional<std::string> slim_main_source(const ExtensionSpec& spec);

/// main.cpp exactly as torch's load_inline writes it: `#include <torch/extension.h>`, the C++
/// sources, then `PYBIND11_MODULE` with one `m.def` per name of `functions`.
std::string full_main_source(const ExtensionSpec& spec);

/// The CUDA half of `spec` exactly as torch's load_inline writes it: `#include <torch/types.h>`,
/// <cuda.h>, <cuda_runtime.h>, then the CUDA sources.
std::string full_cuda_source(const ExtensionSpec& spec);

/// Builds extensions the way torch.utils.cpp_extension.load_inline would (main.cpp with the
/// pybind11 bindings of `functions`, cuda.cu with the CUDA sources; both compile at the same
/// time, then link), with our compilers, in parallel and cached at two levels: objects (main.o and
/// cuda.o each keyed by their own inputs: the rollouts of one infilling problem share main.o) and
/// linked modules. The module is named after main.o's key. Thread-safe: concurrent builds of one
/// key wait for the first.
class ExtensionBuilder {
 public:
  ExtensionBuilder(Toolchain toolchain, BuildOptions options);

  /// Builds `spec` or serves it from the cache. Compile errors and time-outs are results, not
  /// exceptions; throws dice::Error only if the cache folder cannot be written.
  BuildResult build(const ExtensionSpec& spec);

  /// The cache key of `spec` under this builder's toolchain and arch.
  std::string key(const ExtensionSpec& spec) const;

  /// The compiler main.cpp is compiled with (after resolving BuildOptions::main_compiler).
  const Compiler& main_compiler() const { return main_compiler_; }

  /// "-gencode=arch=compute_90,code=sm_90" for "sm_90". Throws dice::InputError on a bad arch.
  static std::string gencode_flag(const std::string& arch);

 private:
  struct Keys;
  Keys keys(const ExtensionSpec& spec) const;
  BuildResult build_uncached(const ExtensionSpec& spec, const Keys& keys);
  /// An object in cache_dir/obj/<key>/: from the cache or compiled by `compile` (which runs in a
  /// fresh folder and leaves `object.o` there on success).
  struct Object;
  Object object(const std::string& key, const std::string& what,
                const std::function<ObjectOutcome(const std::filesystem::path& dir,
                                                  std::string& log)>& compile);
  ObjectOutcome compile_main(const ExtensionSpec& spec, const Keys& keys,
                             const std::filesystem::path& dir, std::string& log);
  ObjectOutcome compile_cuda(const ExtensionSpec& spec, const Keys& keys,
                             const std::filesystem::path& dir, std::string& log);
  CommandResult run_compiler(const std::vector<std::string>& argv,
                             const std::filesystem::path& cwd);

  Toolchain toolchain_;
  BuildOptions options_;
  std::string fingerprint_;
  // sha256 of the slim headers in the cache keys ("" without options_.slim_headers).
  std::string slim_main_hash_, slim_cuda_hash_;
  Compiler cxx_;            // the toolchain's C++ compiler (reference behaviour, linking)
  Compiler main_compiler_;  // main.cpp's
  std::counting_semaphore<> compiler_slots_;
  KeyedMutex building_;
  PchCache pch_;
};

}  // namespace dice::eval
