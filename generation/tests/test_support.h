#pragma once
// Shared helpers of the generation tests.

#include <unistd.h>

#include <filesystem>
#include <string>

namespace dice::generation::testing {

/// A fresh, empty folder `<tmp>/dice_generation_<name><pid>` (removed first if it exists; left
/// behind for inspection). Throws std::filesystem::filesystem_error if it cannot be made.
inline std::filesystem::path temp_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("dice_generation_" + name + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace dice::generation::testing
