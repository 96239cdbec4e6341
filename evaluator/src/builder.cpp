#include "dice/evaluator/builder.h"

#include <fmt/format.h>
#include <unistd.h>

#include <regex>
#include <thread>

#include "dice/core/error.h"
#include "dice/core/files.h"
#include "dice/core/hash.h"
#include "dice/core/process.h"

namespace dice::eval {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kBuilderVersion = 1;  // bump when the generated files or commands change
constexpr std::size_t kLogTail = 8000;

std::vector<std::string> string_list(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return {};
  return j.at(key).get<std::vector<std::string>>();
}

/// Identifier-safe version of an extension name.
std::string sanitize(const std::string& name) {
  std::string out;
  for (char c : name) out.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out.front()))) out.insert(0, "ext_");
  return out.substr(0, 64);
}

std::string main_cpp(const ExtensionSpec& spec) {
  std::string out = "#include <torch/extension.h>\n" + spec.cpp_sources + "\n";
  if (spec.functions.is_null()) return out;
  out += "\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n";
  const auto bind = [&](const std::string& fn, const std::string& doc) {
    out += fmt::format("m.def(\"{0}\", torch::wrap_pybind_function({0}), {1});\n", fn,
                       json(doc).dump());
  };
  if (spec.functions.is_object()) {
    for (const auto& [fn, doc] : spec.functions.items())
      bind(fn, doc.is_string() ? doc.get<std::string>() : fn);
  } else if (spec.functions.is_string()) {
    bind(spec.functions.get<std::string>(), spec.functions.get<std::string>());
  } else {
    for (const auto& fn : spec.functions) bind(fn.get<std::string>(), fn.get<std::string>());
  }
  out += "}\n";
  return out;
}

std::string cuda_cu(const ExtensionSpec& spec) {
  return "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n" +
         spec.cuda_sources + "\n";
}

}  // namespace

ExtensionSpec ExtensionSpec::from_json(const json& j) {
  ExtensionSpec s;
  try {
    s.digest = j.at("digest").get<std::string>();
    s.name = j.at("name").get<std::string>();
    s.cpp_sources = j.value("cpp_sources", "");
    s.cuda_sources = j.value("cuda_sources", "");
    s.functions = j.value("functions", json());
    s.extra_cflags = string_list(j, "extra_cflags");
    s.extra_cuda_cflags = string_list(j, "extra_cuda_cflags");
    s.extra_ldflags = string_list(j, "extra_ldflags");
    s.extra_include_paths = string_list(j, "extra_include_paths");
    s.with_cuda = j.value("with_cuda", !s.cuda_sources.empty());
  } catch (const json::exception& e) {
    throw Error(std::string("capture record of load_inline is malformed: ") + e.what());
  }
  return s;
}

ExtensionBuilder::ExtensionBuilder(Toolchain toolchain, BuildOptions options)
    : toolchain_(std::move(toolchain)),
      options_(std::move(options)),
      fingerprint_(toolchain_.fingerprint()),
      compiler_slots_(std::max(1, options_.jobs)) {
  gencode_flag(options_.arch);  // validates
}

std::string ExtensionBuilder::gencode_flag(const std::string& arch) {
  static const std::regex pattern("sm_([0-9]{2,3}a?)");
  std::smatch m;
  if (!std::regex_match(arch, m, pattern))
    throw InputError("--arch " + arch + ": expected sm_XY or sm_XYa (e.g. sm_90, sm_90a)");
  return fmt::format("-gencode=arch=compute_{0},code=sm_{0}", m[1].str());
}

std::string ExtensionBuilder::key(const ExtensionSpec& spec) const {
  const json j = {{"builder", kBuilderVersion},
                  {"toolchain", fingerprint_},
                  {"arch", options_.arch},
                  {"name", spec.name},
                  {"cpp", spec.cpp_sources},
                  {"cuda", spec.cuda_sources},
                  {"functions", spec.functions},
                  {"cflags", spec.extra_cflags},
                  {"cuda_cflags", spec.extra_cuda_cflags},
                  {"ldflags", spec.extra_ldflags},
                  {"include", spec.extra_include_paths},
                  {"with_cuda", spec.with_cuda}};
  return sha256_hex(j.dump());
}

BuildResult ExtensionBuilder::build(const ExtensionSpec& spec) {
  const auto start = Clock::now();
  const std::string k = key(spec);
  const fs::path dir = options_.cache_dir / "ext" / k;
  {
    // One build per key at a time in this process; others wait and then read the cache.
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return !in_flight_.contains(k); });
    in_flight_[k] = true;
  }
  struct Release {
    ExtensionBuilder* self;
    const std::string& key;
    ~Release() {
      {
        const std::lock_guard lock(self->mutex_);
        self->in_flight_.erase(key);
      }
      self->done_.notify_all();
    }
  } release{this, k};

  BuildResult result;
  if (fs::exists(dir / "result.json")) {
    try {
      const json cached = json::parse(read_file(dir / "result.json"));
      result.ok = cached.at("ok").get<bool>();
      result.key = k;
      result.cached = true;
      result.module_path = dir / cached.at("module").get<std::string>();
      result.log_tail = read_file_tail(dir / "build.log", kLogTail);
      result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (!result.ok || fs::exists(result.module_path)) return result;
    } catch (const std::exception&) {
    }
    fs::remove_all(dir);  // a damaged cache entry is rebuilt
  }
  result = build_uncached(spec, k);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

BuildResult ExtensionBuilder::build_uncached(const ExtensionSpec& spec, const std::string& k) {
  const fs::path final_dir = options_.cache_dir / "ext" / k;
  const fs::path dir = options_.cache_dir / "ext" /
                       fmt::format("{}.tmp-{}-{}", k, ::getpid(),
                                   std::hash<std::thread::id>{}(std::this_thread::get_id()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string module = sanitize(spec.name) + "_" + k.substr(0, 12);
  const bool cuda = spec.with_cuda || !spec.cuda_sources.empty();
  write_file_atomic(dir / "main.cpp", main_cpp(spec));
  if (cuda) write_file_atomic(dir / "cuda.cu", cuda_cu(spec));

  std::vector<std::string> defines{"-DTORCH_EXTENSION_NAME=" + module};
  std::vector<std::string> includes;
  for (const auto& p : spec.extra_include_paths) includes.push_back("-I" + p);
  for (const auto& p : toolchain_.include_paths) includes.insert(includes.end(), {"-isystem", p});

  std::vector<std::string> cxx{toolchain_.cxx, "-c",    "main.cpp",   "-o",
                               "main.o",       "-fPIC", "-std=c++17", "-O2"};
  cxx.insert(cxx.end(), defines.begin(), defines.end());
  cxx.insert(cxx.end(), toolchain_.cflags.begin(), toolchain_.cflags.end());
  cxx.insert(cxx.end(), includes.begin(), includes.end());
  cxx.insert(cxx.end(), spec.extra_cflags.begin(), spec.extra_cflags.end());
  if (cuda) cxx.push_back("-DWITH_CUDA");

  std::vector<std::string> nvcc{toolchain_.nvcc,
                                "-c",
                                "cuda.cu",
                                "-o",
                                "cuda.o",
                                "--compiler-options",
                                "-fPIC",
                                "-std=c++17",
                                gencode_flag(options_.arch)};
  nvcc.insert(nvcc.end(), defines.begin(), defines.end());
  nvcc.insert(nvcc.end(), toolchain_.cuda_cflags.begin(), toolchain_.cuda_cflags.end());
  nvcc.insert(nvcc.end(), includes.begin(), includes.end());
  nvcc.insert(nvcc.end(), spec.extra_cuda_cflags.begin(), spec.extra_cuda_cflags.end());

  std::vector<std::string> link{toolchain_.cxx, "main.o"};
  if (cuda) link.push_back("cuda.o");
  link.insert(link.end(), {"-shared", "-o", module + ".so"});
  link.insert(link.end(), toolchain_.ldflags.begin(), toolchain_.ldflags.end());
  link.insert(link.end(), spec.extra_ldflags.begin(), spec.extra_ldflags.end());

  std::string log;
  bool ok = true, timed_out = false;
  const auto run = [&](const std::vector<std::string>& argv) {
    compiler_slots_.acquire();
    CommandResult r;
    try {
      r = run_command({.argv = argv, .cwd = dir}, options_.timeout, kLogTail * 4);
    } catch (...) {
      compiler_slots_.release();
      throw;
    }
    compiler_slots_.release();
    return r;
  };
  const auto note = [&](const std::vector<std::string>& argv, const CommandResult& r) {
    log += "$";
    for (const auto& a : argv) log += " " + a;
    log += "\n" + r.output;
    if (!r.status.ok()) {
      ok = false;
      timed_out = timed_out || r.timed_out;
      log += fmt::format("[{}{}]\n", r.status.describe(), r.timed_out ? ", timed out" : "");
    }
  };
  // The C++ and CUDA halves compile at the same time, then link.
  CommandResult cuda_result;
  std::jthread cuda_thread;
  if (cuda) cuda_thread = std::jthread([&] { cuda_result = run(nvcc); });
  const CommandResult cxx_result = run(cxx);
  if (cuda_thread.joinable()) cuda_thread.join();
  note(cxx, cxx_result);
  if (cuda) note(nvcc, cuda_result);
  if (ok) note(link, run(link));
  write_file_atomic(dir / "build.log", log);
  for (const char* object : {"main.o", "cuda.o"}) fs::remove(dir / object);

  BuildResult result;
  result.ok = ok;
  result.timed_out = timed_out;
  result.key = k;
  result.log_tail = tail_text(log, kLogTail);
  if (timed_out) {  // not cached: a time-out may be the machine's fault
    fs::remove_all(dir);
    return result;
  }
  write_file_atomic(dir / "result.json", json{{"ok", ok}, {"module", module + ".so"}}.dump());
  std::error_code ec;
  fs::rename(dir, final_dir, ec);
  if (ec) {  // another process finished the same key first: use its copy
    fs::remove_all(dir);
    if (!fs::exists(final_dir / "result.json"))
      throw Error("cannot store build in cache folder " + final_dir.string() + ": " + ec.message());
  }
  result.module_path = final_dir / (module + ".so");
  return result;
}

}  // namespace dice::eval
