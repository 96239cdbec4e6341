#include "dice/evaluator/builder.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <regex>
#include <thread>

#include "dice/core/error.h"
#include "dice/core/files.h"
#include "dice/core/hash.h"
#include "dice/core/process.h"
#include "dice/evaluator/slim_header_text.h"

namespace dice::eval {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kBuilderVersion = 4;  // bump when the generated files or commands change
constexpr const char* kSlimHeaderName = "dice_torch_cuda.h";
constexpr const char* kSlimMainHeaderName = "dice_torch_main.h";
constexpr const char* kFullMainHeaderName = "torch_extension.h";
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

/// The pybind11 module of `spec.functions` as load_inline writes it (empty without functions).
std::string bindings(const ExtensionSpec& spec) {
  std::string out;
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

/// True when `line` is only an include of one of torch's umbrella headers (and maybe a comment).
bool umbrella_include(const std::string& line) {
  static const std::regex pattern(
      R"(\s*#\s*include\s*[<"]torch/(extension|torch|all|types)\.h[>"]\s*(//.*)?\r?)");
  return std::regex_match(line, pattern);
}

/// `sources` with each line that is only an umbrella include turned into a comment naming
/// `header` (line numbers kept).
std::string without_umbrella_includes(const std::string& sources, const std::string& header) {
  std::string out;
  for (std::size_t pos = 0;;) {
    const std::size_t end = std::min(sources.find('\n', pos), sources.size());
    const std::string line = sources.substr(pos, end - pos);
    out += umbrella_include(line) ? "// dice: in " + header + ": " + line : line;
    if (end == sources.size()) break;
    out += '\n';
    pos = end + 1;
  }
  return out;
}

/// Adds the compile time of an earlier, failed attempt at the same object to `later`'s.
void add_attempt_time(ObjectOutcome& later, const ObjectOutcome& earlier) {
  later.seconds += earlier.seconds;
  later.cpu_seconds += earlier.cpu_seconds;
}

/// A source the slim headers must not be substituted in (builder.h, slim_cuda_source).
bool needs_torch_factories(const std::string& sources) {
  return sources.find("requires_grad") != std::string::npos;
}

/// Renames the finished folder `staged` (with its result.json) to `final_dir`. When another
/// process published the same key first, `staged` is removed and its copy is used. Throws
/// dice::Error naming `what` and the folder when neither copy is there.
void publish_cache_folder(const fs::path& staged, const fs::path& final_dir, const char* what) {
  std::error_code ec;
  fs::rename(staged, final_dir, ec);
  if (!ec) return;
  fs::remove_all(staged);
  if (!fs::exists(final_dir / "result.json"))
    throw Error(fmt::format("cannot store {} in cache folder {}: {}", what, final_dir.string(),
                            ec.message()));
}

}  // namespace

std::string_view slim_cuda_header() {
  return kSlimCudaHeaderText;
}

std::string slim_main_header() {
  return fmt::format(
      "// {}: dice's slim header of C++ halves (main.cpp), written by dice's builder\n"
      "#ifndef DICE_TORCH_MAIN_H\n#define DICE_TORCH_MAIN_H\n#define DICE_TORCH_HOST_ONLY\n{}\n"
      "#include <torch/csrc/Exceptions.h>    // torch::wrap_pybind_function\n"
      "#include <torch/csrc/utils/pybind.h>  // pybind11 and its at::Tensor casters\n"
      "#endif  // DICE_TORCH_MAIN_H\n",
      kSlimMainHeaderName, slim_cuda_header());
}

std::string full_main_source(const ExtensionSpec& spec) {
  return "#include <torch/extension.h>\n" + spec.cpp_sources + "\n" + bindings(spec);
}

std::optional<std::string> slim_main_source(const ExtensionSpec& spec) {
  if (needs_torch_factories(spec.cpp_sources)) return std::nullopt;
  return fmt::format("#include \"{}\"\n", kSlimMainHeaderName) +
         without_umbrella_includes(spec.cpp_sources, kSlimMainHeaderName) + "\n" + bindings(spec);
}

std::string full_cuda_source(const ExtensionSpec& spec) {
  return "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n" +
         spec.cuda_sources + "\n";
}

std::optional<std::string> slim_cuda_source(const ExtensionSpec& spec) {
  if (needs_torch_factories(spec.cuda_sources)) return std::nullopt;
  // Three lines like torch's preamble, so that the sources keep their line numbers.
  return fmt::format("#include \"{}\"\n// <cuda.h>, <cuda_runtime.h>: in {}\n//\n", kSlimHeaderName,
                     kSlimHeaderName) +
         without_umbrella_includes(spec.cuda_sources, kSlimHeaderName) +
         "\n";  // as full_cuda_source
}

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

struct ExtensionBuilder::Keys {
  std::string full, main, cuda;  // cuda is empty without CUDA sources
  std::string module;            // the module's name: sanitized name + main key
  // main.cpp's flags (also those of its precompiled header), less the defines that torch's headers
  // do not read: TORCH_EXTENSION_NAME and WITH_CUDA.
  std::vector<std::string> main_flags;
  bool cuda_needed = false;
};

struct ExtensionBuilder::Object {
  bool ok = false;
  ObjectOutcome outcome;
  fs::path path;  // object.o when ok
  std::string log;
};

ExtensionBuilder::ExtensionBuilder(Toolchain toolchain, BuildOptions options)
    : toolchain_(std::move(toolchain)),
      options_(std::move(options)),
      fingerprint_(toolchain_.fingerprint()),
      slim_main_hash_(options_.slim_headers ? sha256_hex(slim_main_header()) : ""),
      slim_cuda_hash_(options_.slim_headers ? sha256_hex(slim_cuda_header()) : ""),
      compiler_slots_(std::max(1, options_.jobs)),
      pch_(options_.cache_dir, options_.timeout) {
  gencode_flag(options_.arch);  // validates
  cxx_ = {.path = toolchain_.cxx, .version = toolchain_.cxx_version, .clang = false};
  cxx_.clang = cxx_.version.find("clang") != std::string::npos;
  main_compiler_ = cxx_;
  const std::string& wanted = options_.main_compiler;
  if (wanted == "auto") {
    if (auto clang = Compiler::probe("clang++", std::chrono::seconds(30)); clang && clang->clang)
      main_compiler_ = *clang;
  } else if (!wanted.empty() && wanted != "cxx") {
    auto probed = Compiler::probe(wanted, std::chrono::seconds(30));
    if (!probed) throw InputError("--main-compiler " + wanted + ": does not run");
    main_compiler_ = *probed;
  }
}

std::string ExtensionBuilder::gencode_flag(const std::string& arch) {
  static const std::regex pattern("sm_([0-9]{2,3}a?)");
  std::smatch m;
  if (!std::regex_match(arch, m, pattern))
    throw InputError("--arch " + arch + ": expected sm_XY or sm_XYa (e.g. sm_90, sm_90a)");
  return fmt::format("-gencode=arch=compute_{0},code=sm_{0}", m[1].str());
}

ExtensionBuilder::Keys ExtensionBuilder::keys(const ExtensionSpec& spec) const {
  Keys k;
  k.cuda_needed = spec.with_cuda || !spec.cuda_sources.empty();
  std::vector<std::string> includes;
  for (const auto& p : spec.extra_include_paths) includes.push_back("-I" + p);
  for (const auto& p : toolchain_.include_paths) includes.insert(includes.end(), {"-isystem", p});
  // torch's load_inline flags: no -O (the candidate's extra_cflags may add one).
  k.main_flags = {"-fPIC", "-std=c++17"};
  k.main_flags.insert(k.main_flags.end(), toolchain_.cflags.begin(), toolchain_.cflags.end());
  k.main_flags.insert(k.main_flags.end(), includes.begin(), includes.end());
  k.main_flags.insert(k.main_flags.end(), spec.extra_cflags.begin(), spec.extra_cflags.end());
  k.main = sha256_hex(json{
      {"builder", kBuilderVersion},
      {"with_cuda", k.cuda_needed},
      {"toolchain", fingerprint_},
      {"compiler", main_compiler_.version},
      {"name", spec.name},
      {"cpp", spec.cpp_sources},
      {"functions", spec.functions},
      {"flags", k.main_flags},
      {"slim_header",
       slim_main_hash_}}.dump());
  k.module = sanitize(spec.name) + "_" + k.main.substr(0, 12);
  if (k.cuda_needed) {
    k.cuda = sha256_hex(json{
        {"builder", kBuilderVersion},
        {"toolchain", fingerprint_},
        {"arch", options_.arch},
        {"module", k.module},
        {"cuda", spec.cuda_sources},
        {"cuda_cflags", spec.extra_cuda_cflags},
        {"include", spec.extra_include_paths},
        {"slim_header",
         slim_cuda_hash_}}.dump());
  }
  k.full = sha256_hex(json{{"builder", kBuilderVersion},
                           {"toolchain", fingerprint_},
                           {"main", k.main},
                           {"cuda", k.cuda},
                           {"ldflags", spec.extra_ldflags}}
                          .dump());
  return k;
}

std::string ExtensionBuilder::key(const ExtensionSpec& spec) const {
  return keys(spec).full;
}

CommandResult ExtensionBuilder::run_compiler(const std::vector<std::string>& argv,
                                             const fs::path& cwd) {
  compiler_slots_.acquire();
  struct Release {
    std::counting_semaphore<>& slots;
    ~Release() { slots.release(); }
  } release{compiler_slots_};
  return run_command({.argv = argv, .cwd = cwd}, options_.timeout, kLogTail * 4);
}

namespace {

/// Appends a command and its output to `log`; the status of the command as an object outcome.
std::string note(std::string& log, const std::vector<std::string>& argv, const CommandResult& r) {
  log += "$";
  for (const auto& a : argv) log += " " + a;
  log += "\n" + r.output;
  if (r.status.ok()) return "built";
  log += fmt::format("[{}{}]\n", r.status.describe(), r.timed_out ? ", timed out" : "");
  if (r.timed_out) return "timeout";
  return r.status.exited ? "failed" : "killed";  // killed: by us, or out of memory
}

}  // namespace

ExtensionBuilder::Object ExtensionBuilder::object(
    const std::string& key, const std::string& what,
    const std::function<ObjectOutcome(const fs::path&, std::string&)>& compile) {
  const fs::path dir = options_.cache_dir / "obj" / key;
  const auto lock = building_.lock("obj/" + key);
  Object o;
  if (fs::exists(dir / "result.json")) {
    try {
      const json cached = json::parse(read_file(dir / "result.json"));
      o.ok = cached.at("ok").get<bool>();
      o.outcome.status = "cached";
      o.outcome.pch = cached.value("pch", false);
      o.outcome.compiler = cached.value("compiler", "");
      o.outcome.header = cached.value("header", "");
      o.path = fs::absolute(dir / "object.o");
      o.log = read_file_tail(dir / "build.log", kLogTail);
      if (!o.ok || fs::exists(o.path)) return o;
    } catch (const std::exception&) {
    }
    fs::remove_all(dir);  // a damaged entry is rebuilt
  }
  const fs::path tmp = options_.cache_dir / "obj" /
                       fmt::format("{}.tmp-{}-{}", key, ::getpid(),
                                   std::hash<std::thread::id>{}(std::this_thread::get_id()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  o = {};
  o.outcome = compile(tmp, o.log);
  o.ok = o.outcome.status == "built";
  if (o.outcome.status == "timeout" || o.outcome.status == "killed") {
    fs::remove_all(tmp);  // not cached: the machine's fault, or an interruption
    return o;
  }
  write_file_atomic(tmp / "build.log", o.log);
  write_file_atomic(tmp / "result.json", json{{"ok", o.ok},
                                              {"what", what},
                                              {"pch", o.outcome.pch},
                                              {"compiler", o.outcome.compiler},
                                              {"header", o.outcome.header},
                                              {"seconds", o.outcome.seconds},
                                              {"cpu_seconds", o.outcome.cpu_seconds}}
                                             .dump());
  publish_cache_folder(tmp, dir, "an object");
  o.path = fs::absolute(dir / "object.o");
  return o;
}

ObjectOutcome ExtensionBuilder::compile_main(const ExtensionSpec& spec, const Keys& k,
                                             const fs::path& dir, std::string& log) {
  const CompileRunner runner = [this](const std::vector<std::string>& argv, const fs::path& cwd) {
    return run_compiler(argv, cwd);
  };
  const auto attempt = [&](const Compiler& compiler, const std::string& source,
                           const PchHeader& header, const std::string& label) {
    const auto start = Clock::now();
    write_file_atomic(dir / "main.cpp", source);
    std::vector<std::string> argv{compiler.path, "-c",       "main.cpp",
                                  "-o",          "object.o", "-DTORCH_EXTENSION_NAME=" + k.module};
    if (k.cuda_needed) argv.push_back("-DWITH_CUDA");
    argv.insert(argv.end(), k.main_flags.begin(), k.main_flags.end());
    std::vector<std::string> pch;
    if (options_.pch) pch = pch_.flags_for(header, compiler, k.main_flags, runner);
    argv.insert(argv.end(), pch.begin(), pch.end());
    const std::size_t log_start = log.size();
    ObjectOutcome out;
    const CommandResult r = run_compiler(argv, dir);
    out.status = note(log, argv, r);
    out.cpu_seconds = r.status.cpu_seconds;
    out.compiler = compiler.version;
    out.header = label;
    // gcc says why it did not use a precompiled header it found (-Winvalid-pch).
    out.pch = !pch.empty() && log.find(".gch", log_start) == std::string::npos;
    out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return out;
  };
  const PchHeader full{kFullMainHeaderName, "#include <torch/extension.h>\n"};
  const std::optional<std::string> slim =
      options_.slim_headers ? slim_main_source(spec) : std::nullopt;
  std::optional<ObjectOutcome> slim_attempt;  // the failed slim compile, if any
  if (slim) {
    const PchHeader header{kSlimMainHeaderName, slim_main_header()};
    write_file_atomic(dir / header.name, header.text);
    ObjectOutcome out = attempt(main_compiler_, *slim, header, "slim");
    if (out.status != "failed") return out;
    // The slim header lacks something these sources use: torch's own headers decide.
    log += fmt::format("# main.cpp failed with {}; compiled again with torch's headers:\n",
                       kSlimMainHeaderName);
    fs::rename(dir / "main.cpp", dir / "main.slim.cpp");
    slim_attempt = out;
  }
  ObjectOutcome out = attempt(main_compiler_, full_main_source(spec), full, "full");
  if (out.status == "failed" && main_compiler_.path != cxx_.path) {
    log += fmt::format("# {} failed; the toolchain's compiler decides:\n", main_compiler_.path);
    const ObjectOutcome first = out;
    out = attempt(cxx_, full_main_source(spec), full, "full");
    add_attempt_time(out, first);
  }
  if (slim_attempt) add_attempt_time(out, *slim_attempt);
  return out;
}

ObjectOutcome ExtensionBuilder::compile_cuda(const ExtensionSpec& spec, const Keys& k,
                                             const fs::path& dir, std::string& log) {
  const auto attempt = [&](const std::string& source, const std::string& header) {
    const auto start = Clock::now();
    write_file_atomic(dir / "cuda.cu", source);
    std::vector<std::string> nvcc{toolchain_.nvcc,
                                  "-c",
                                  "cuda.cu",
                                  "-o",
                                  "object.o",
                                  "--compiler-options",
                                  "-fPIC",
                                  "-std=c++17",
                                  gencode_flag(options_.arch),
                                  "-DTORCH_EXTENSION_NAME=" + k.module};
    nvcc.insert(nvcc.end(), toolchain_.cuda_cflags.begin(), toolchain_.cuda_cflags.end());
    for (const auto& p : spec.extra_include_paths) nvcc.push_back("-I" + p);
    for (const auto& p : toolchain_.include_paths) nvcc.insert(nvcc.end(), {"-isystem", p});
    nvcc.insert(nvcc.end(), spec.extra_cuda_cflags.begin(), spec.extra_cuda_cflags.end());
    ObjectOutcome out;
    const CommandResult r = run_compiler(nvcc, dir);
    out.status = note(log, nvcc, r);
    out.cpu_seconds = r.status.cpu_seconds;
    out.compiler = toolchain_.nvcc_version;
    out.header = header;
    out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return out;
  };
  const std::optional<std::string> slim =
      options_.slim_headers ? slim_cuda_source(spec) : std::nullopt;
  if (!slim) return attempt(full_cuda_source(spec), "full");
  write_file_atomic(dir / kSlimHeaderName, std::string(slim_cuda_header()));
  ObjectOutcome out = attempt(*slim, "slim");
  if (out.status != "failed") return out;
  // The slim header lacks something this source uses: torch's own headers decide.
  log += fmt::format("# cuda.cu failed with {}; compiled again with torch's headers:\n",
                     kSlimHeaderName);
  fs::rename(dir / "cuda.cu", dir / "cuda.slim.cu");
  const ObjectOutcome first = out;
  out = attempt(full_cuda_source(spec), "full");
  add_attempt_time(out, first);
  return out;
}

BuildResult ExtensionBuilder::build(const ExtensionSpec& spec) {
  const auto start = Clock::now();
  const Keys k = keys(spec);
  const fs::path dir = options_.cache_dir / "ext" / k.full;
  // One build per key at a time in this process; others wait and then read the cache.
  const auto lock = building_.lock("ext/" + k.full);
  BuildResult result;
  if (fs::exists(dir / "result.json")) {
    try {
      const json cached = json::parse(read_file(dir / "result.json"));
      result.ok = cached.at("ok").get<bool>();
      result.key = k.full;
      result.main_key = k.main;
      result.cuda_key = k.cuda;
      result.cached = true;
      result.main.status = "cached";
      if (k.cuda_needed) result.cuda.status = "cached";
      result.main.header = cached.value("main_header", "");
      result.cuda.header = cached.value("cuda_header", "");
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

BuildResult ExtensionBuilder::build_uncached(const ExtensionSpec& spec, const Keys& k) {
  BuildResult result;
  result.key = k.full;
  result.main_key = k.main;
  result.cuda_key = k.cuda;
  // The C++ and CUDA halves compile at the same time (each from its own cache), then link.
  Object cuda;
  std::jthread cuda_thread;
  if (k.cuda_needed) {
    cuda_thread = std::jthread([&] {
      cuda = object(k.cuda, "cuda.cu", [&](const fs::path& dir, std::string& log) {
        return compile_cuda(spec, k, dir, log);
      });
    });
  }
  Object main = object(k.main, "main.cpp", [&](const fs::path& dir, std::string& log) {
    return compile_main(spec, k, dir, log);
  });
  if (cuda_thread.joinable()) cuda_thread.join();
  result.main = main.outcome;
  result.cuda = cuda.outcome;
  std::string log = main.log + cuda.log;
  const bool compiled = main.ok && (!k.cuda_needed || cuda.ok);
  result.timed_out = main.outcome.status == "timeout" || cuda.outcome.status == "timeout";
  const bool killed = main.outcome.status == "killed" || cuda.outcome.status == "killed";

  const fs::path final_dir = options_.cache_dir / "ext" / k.full;
  const fs::path dir = options_.cache_dir / "ext" /
                       fmt::format("{}.tmp-{}-{}", k.full, ::getpid(),
                                   std::hash<std::thread::id>{}(std::this_thread::get_id()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  bool linked = false;
  if (compiled) {
    std::vector<std::string> link{toolchain_.cxx, main.path.string()};
    if (k.cuda_needed) link.push_back(cuda.path.string());
    link.insert(link.end(), {"-shared", "-o", k.module + ".so"});
    link.insert(link.end(), toolchain_.ldflags.begin(), toolchain_.ldflags.end());
    link.insert(link.end(), spec.extra_ldflags.begin(), spec.extra_ldflags.end());
    const auto start = Clock::now();
    const CommandResult linked_by = run_compiler(link, dir);
    const std::string status = note(log, link, linked_by);
    result.link_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    result.link_cpu_seconds = linked_by.status.cpu_seconds;
    linked = status == "built";
    result.timed_out = result.timed_out || status == "timeout";
    if (status == "killed") {
      fs::remove_all(dir);
      result.log_tail = tail_text(log, kLogTail);
      return result;
    }
  }
  result.ok = linked;
  result.log_tail = tail_text(log, kLogTail);
  if (result.timed_out || killed) {  // not cached: a time-out may be the machine's fault
    fs::remove_all(dir);
    return result;
  }
  write_file_atomic(dir / "build.log", log);
  write_file_atomic(dir / "result.json", json{{"ok", result.ok},
                                              {"module", k.module + ".so"},
                                              {"main_header", result.main.header},
                                              {"cuda_header", result.cuda.header}}
                                             .dump());
  publish_cache_folder(dir, final_dir, "a build");
  result.module_path = final_dir / (k.module + ".so");
  return result;
}

}  // namespace dice::eval
