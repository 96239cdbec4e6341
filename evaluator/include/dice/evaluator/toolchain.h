#pragma once
// The compilers and the PyTorch installation that candidates are built against and run with.

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace dice::eval {

/// How to start the Python worker package: interpreter and the folder that holds dice_worker.
struct PythonEnv {
  std::string python = "python3";
  std::filesystem::path worker_path;  ///< put on PYTHONPATH
  /// argv for `python -m dice_worker <args...>`.
  std::vector<std::string> argv(const std::vector<std::string>& args) const;
};

/// What `python -m dice_worker toolchain` reports, plus the native compilers' versions.
struct Toolchain {
  std::string torch_version;
  std::string python_version;
  bool cuda_available = false;
  int device_count = 0;
  std::vector<std::string> device_names;
  std::vector<std::string> include_paths;  ///< torch's and Python's headers
  std::vector<std::string> cflags;         ///< torch's extension flags for the C++ compiler
  std::vector<std::string> cuda_cflags;    ///< torch's extension flags for nvcc
  std::vector<std::string> ldflags;        ///< torch's libraries
  std::string cxx = "c++";
  std::string nvcc = "nvcc";
  std::string cxx_version;   ///< first line of `c++ --version`
  std::string nvcc_version;  ///< last line of `nvcc --version`; empty if nvcc is missing

  /// SHA-256 of everything above that changes a build's output (not the devices).
  std::string fingerprint() const;
};

/// Queries the toolchain. Throws dice::Error with the worker's output if Python or torch is
/// unusable. `timeout` bounds each command.
Toolchain query_toolchain(const PythonEnv& env, std::chrono::seconds timeout);

}  // namespace dice::eval
