#pragma once
// Precompiled headers for the C++ half of candidates' extensions (main.cpp): dice's slim header
// or <torch/extension.h>. Parsing torch's headers is most of a main.cpp compile; a precompiled
// header is built once per header, compiler and flag set into the cache and used by every later
// compile.

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dice/core/keyed_mutex.h"
#include "dice/core/process.h"

namespace dice::eval {

/// A C++ compiler as the builder uses it.
struct Compiler {
  std::string path;     ///< what is executed: "c++", "clang++", "/usr/bin/g++-13"
  std::string version;  ///< first line of `path --version`
  bool clang = false;   ///< clang (PCH with -fpch-instantiate-templates) or gcc

  /// Runs `path --version`; nothing if it does not run within `timeout`.
  static std::optional<Compiler> probe(const std::string& path, std::chrono::seconds timeout);
};

/// A header to precompile: its file name and its text (e.g. "torch_extension.h" and
/// "#include <torch/extension.h>\n").
struct PchHeader {
  std::string name;
  std::string text;
};

/// Runs one compiler command in `cwd` (the builder bounds how many run at once).
using CompileRunner = std::function<CommandResult(const std::vector<std::string>& argv,
                                                  const std::filesystem::path&)>;

/// The precompiled headers in cache_dir/pch/<key>/ (key: the header's text, compiler version and
/// the exact flags). gcc: `<name>.gch`, used through `-include <name>` (gcc ignores a .gch that
/// does not fit the compile and parses the header instead; -Winvalid-pch says so in the log).
/// clang: `<name>.pch` built with -fpch-instantiate-templates (template
/// instantiations done once in the header instead of in every compile; clang >= 11). A header
/// that fails to build is remembered and compiles go on without it. Thread-safe.
class PchCache {
 public:
  PchCache(std::filesystem::path cache_dir, std::chrono::seconds timeout);
  PchCache(const PchCache&) = delete;
  PchCache& operator=(const PchCache&) = delete;

  /// What to add to a compile of main.cpp by `compiler` with `flags` to use `header`
  /// precompiled: {"-include", ".../<name>", ...}. Builds it first if it is not in the cache
  /// (other threads asking for the same one wait). Empty when it cannot be built. Throws
  /// dice::Error only if the cache folder cannot be written.
  std::vector<std::string> flags_for(const PchHeader& header, const Compiler& compiler,
                                     const std::vector<std::string>& flags,
                                     const CompileRunner& run);

  /// The cache key of `header` for `compiler` and `flags`.
  static std::string key(const PchHeader& header, const Compiler& compiler,
                         const std::vector<std::string>& flags);

 private:
  std::filesystem::path root_;
  std::chrono::seconds timeout_;
  KeyedMutex building_;
};

}  // namespace dice::eval
