#pragma once
// Shared helpers of the evaluator tests: a scratch folder and the Python environment.

#include <filesystem>
#include <string>

#include <unistd.h>

#include "dice/core/files.h"
#include "dice/evaluator/toolchain.h"

namespace dice::eval::testing {

/// A fresh folder under the system's temporary folder, removed at destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              (name + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    write_file_atomic(path_ / name, text);
    return path_ / name;
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path path_;
};

/// The repository's Python (.venv if present) and worker package.
inline PythonEnv test_python() {
  PythonEnv env;
  const std::filesystem::path venv = std::filesystem::path(DICE_SOURCE_DIR) / ".venv/bin/python3";
  if (std::filesystem::exists(venv)) env.python = venv.string();
  env.worker_path = std::filesystem::path(DICE_SOURCE_DIR) / "evaluator" / "worker";
  return env;
}

/// A small KernelBench-format problem: y = relu(x) on a 4x8 CPU-sized tensor.
inline const char* kReluProblem = R"(import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
)";

}  // namespace dice::eval::testing
