#pragma once
// Defaults that depend on where dice was built (its source folder, DICE_SOURCE_DIR) and on the
// environment, shared by the subcommands.

#include <cstdlib>
#include <filesystem>
#include <string>

namespace dice::cli {

/// The value of environment variable `name` when set and non-empty, else `fallback`.
inline std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

/// `relative` inside the project's shared data (../shared beside the source folder), normalised,
/// e.g. shared_path("data/kernelbench/problems.jsonl").
inline std::filesystem::path shared_path(const std::filesystem::path& relative) {
  return (std::filesystem::path(DICE_SOURCE_DIR) / ".." / "shared" / relative).lexically_normal();
}

/// The KernelBench problems (JSON Lines): $DICE_KERNELBENCH, else the shared data's
/// data/kernelbench/problems.jsonl. Used by eval, bench and generate.
inline std::string default_kernelbench() {
  return env_or("DICE_KERNELBENCH", shared_path("data/kernelbench/problems.jsonl").string());
}

/// The build cache folder: $XDG_CACHE_HOME/dice, else ~/.cache/dice, else <tmp>/dice-cache.
inline std::filesystem::path default_cache() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return std::filesystem::path(xdg) / "dice";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return std::filesystem::path(home) / ".cache" / "dice";
  return std::filesystem::temp_directory_path() / "dice-cache";
}

/// The Python with torch: $DICE_PYTHON, else the project's .venv/bin/python3, else python3.
inline std::string default_python() {
  const std::filesystem::path venv = std::filesystem::path(DICE_SOURCE_DIR) / ".venv/bin/python3";
  return env_or("DICE_PYTHON",
                std::filesystem::exists(venv) ? venv.string() : std::string("python3"));
}

/// The evaluator's Python package folder: $DICE_WORKER_PATH, else evaluator/worker.
inline std::string default_worker_path() {
  return env_or("DICE_WORKER_PATH",
                (std::filesystem::path(DICE_SOURCE_DIR) / "evaluator" / "worker").string());
}

/// The SDAR tokenizer folder of the shared data.
inline std::filesystem::path shared_tokenizer() {
  return shared_path("models/sdar/tokenizer");
}

/// The tokenizer of a model folder: the folder itself when it has tokenizer.json or vocab.json,
/// else the shared SDAR tokenizer.
inline std::string default_tokenizer(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  if (std::filesystem::exists(dir / "tokenizer.json") ||
      std::filesystem::exists(dir / "vocab.json"))
    return model_dir;
  return shared_tokenizer().string();
}

}  // namespace dice::cli
