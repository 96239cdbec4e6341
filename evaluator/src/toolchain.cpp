#include "dice/evaluator/toolchain.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "dice/core/error.h"
#include "dice/core/files.h"
#include "dice/core/hash.h"
#include "dice/core/process.h"

namespace dice::eval {

using nlohmann::json;

std::vector<std::string> PythonEnv::argv(const std::vector<std::string>& args) const {
  std::vector<std::string> out{python, "-m", "dice_worker"};
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

std::string Toolchain::fingerprint() const {
  const json j = {{"torch", torch_version},     {"python", python_version},
                  {"include", include_paths},   {"cflags", cflags},
                  {"cuda_cflags", cuda_cflags}, {"ldflags", ldflags},
                  {"cxx", cxx_version},         {"nvcc", nvcc_version}};
  return sha256_hex(j.dump());
}

namespace {

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

std::string last_line(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const auto pos = text.rfind('\n');
  return pos == std::string::npos ? text : text.substr(pos + 1);
}

}  // namespace

Toolchain query_toolchain(const PythonEnv& env, std::chrono::seconds timeout) {
  ProcessOptions options{.argv = env.argv({"toolchain"})};
  options.env["PYTHONPATH"] = env.worker_path.string();
  const auto r = run_command(options, timeout);
  if (!r.status.ok())
    throw Error(fmt::format("cannot query the Python toolchain with `{}` ({}{}):\n{}",
                            fmt::join(options.argv, " "), r.status.describe(),
                            r.timed_out ? ", timed out" : "", tail_text(r.output, 4000)));
  // The JSON object is the last line; torch may print warnings before it.
  json j;
  try {
    j = json::parse(last_line(r.output));
  } catch (const json::exception& e) {
    throw Error(fmt::format("dice_worker toolchain printed no JSON ({}):\n{}", e.what(),
                            tail_text(r.output, 4000)));
  }
  Toolchain t;
  t.torch_version = j.value("torch", "");
  t.python_version = j.value("python", "");
  t.cuda_available = j.value("cuda_available", false);
  t.device_count = j.value("device_count", 0);
  t.device_names = j.value("device_names", std::vector<std::string>{});
  t.include_paths = j.value("include_paths", std::vector<std::string>{});
  if (j.contains("python_include")) t.include_paths.push_back(j.at("python_include"));
  t.cflags = j.value("cflags", std::vector<std::string>{});
  t.cuda_cflags = j.value("cuda_cflags", std::vector<std::string>{});
  t.ldflags = j.value("ldflags", std::vector<std::string>{});
  if (const char* cxx = std::getenv("CXX"); cxx != nullptr && *cxx != '\0') t.cxx = cxx;
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0')
    t.nvcc = std::string(home) + "/bin/nvcc";
  const auto cxx_v = run_command({.argv = {t.cxx, "--version"}}, timeout);
  if (!cxx_v.status.ok())
    throw Error(fmt::format("C++ compiler `{}` does not run: {}", t.cxx, cxx_v.output));
  t.cxx_version = first_line(cxx_v.output);
  const auto nvcc_v = run_command({.argv = {t.nvcc, "--version"}}, timeout);
  if (nvcc_v.status.ok()) t.nvcc_version = last_line(nvcc_v.output);
  return t;
}

}  // namespace dice::eval
