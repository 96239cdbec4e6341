#include "dice/evaluator/pch.h"

#include <fmt/format.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "dice/core/error.h"
#include "dice/core/files.h"
#include "dice/core/hash.h"

namespace dice::eval {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kPchVersion = 2;  // bump when the commands change

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

}  // namespace

std::optional<Compiler> Compiler::probe(const std::string& path, std::chrono::seconds timeout) {
  try {
    const auto r = run_command({.argv = {path, "--version"}}, timeout);
    if (!r.status.ok()) return std::nullopt;
    Compiler c;
    c.path = path;
    c.version = first_line(r.output);
    c.clang = c.version.find("clang") != std::string::npos;
    return c;
  } catch (const Error&) {
    return std::nullopt;
  }
}

PchCache::PchCache(fs::path cache_dir, std::chrono::seconds timeout)
    : root_(std::move(cache_dir) / "pch"), timeout_(timeout) {}

std::string PchCache::key(const PchHeader& header, const Compiler& compiler,
                          const std::vector<std::string>& flags) {
  return sha256_hex(json{
      {"version", kPchVersion},
      {"compiler", compiler.path},
      {"compiler_version", compiler.version},
      {"header_name", header.name},
      {"header", header.text},
      {"flags", flags}}.dump());
}

std::vector<std::string> PchCache::flags_for(const PchHeader& header, const Compiler& compiler,
                                             const std::vector<std::string>& flags,
                                             const CompileRunner& run) {
  const std::string k = key(header, compiler, flags);
  const fs::path dir = fs::absolute(root_ / k);
  const std::string pch_name = header.name + (compiler.clang ? ".pch" : ".gch");
  std::vector<std::string> use{"-include", (dir / header.name).string()};
  if (!compiler.clang) use.push_back("-Winvalid-pch");
  const auto lock = building_.lock(k);
  const auto cached = [&]() -> std::optional<bool> {
    if (!fs::exists(dir / "result.json")) return std::nullopt;
    try {
      const bool ok = json::parse(read_file(dir / "result.json")).at("ok").get<bool>();
      if (!ok || fs::exists(dir / pch_name)) return ok;
    } catch (const std::exception&) {
    }
    return std::nullopt;
  };
  if (const auto ok = cached()) return *ok ? use : std::vector<std::string>{};

  // Built in place: clang's header records the path of the header it was made from, so the
  // header must stay where it was compiled. The folder counts only once result.json is there;
  // the precompiled file appears by an atomic rename.
  fs::create_directories(dir);
  write_file_atomic(dir / header.name, header.text);
  const std::string tmp = fmt::format("{}.tmp-{}-{}", pch_name, ::getpid(),
                                      std::hash<std::thread::id>{}(std::this_thread::get_id()));
  std::vector<std::string> argv{compiler.path, "-x", "c++-header", header.name, "-o", tmp};
  argv.insert(argv.end(), flags.begin(), flags.end());
  if (compiler.clang) argv.push_back("-fpch-instantiate-templates");
  const CommandResult r = run(argv, dir);
  std::string log = "$";
  for (const auto& a : argv) log += " " + a;
  log += "\n" + r.output + "[" + r.status.describe() + "]\n";
  std::error_code ec;
  // A compiler that was killed (time-out, interruption, out of memory) says nothing about the
  // flags: nothing is remembered and the next compile tries again.
  if (r.timed_out || (!r.status.exited && !r.status.ok())) {
    fs::remove(dir / tmp, ec);
    return {};
  }
  if (r.status.ok()) {
    fs::rename(dir / tmp, dir / pch_name, ec);
    if (ec)
      throw Error("cannot store a precompiled header in " + dir.string() + ": " + ec.message());
  } else {
    fs::remove(dir / tmp, ec);
  }
  write_file_atomic(dir / "build.log", log);
  write_file_atomic(
      dir / "result.json",
      json{{"ok", r.status.ok()}, {"seconds", r.seconds}, {"cpu_seconds", r.status.cpu_seconds}}
          .dump());
  return r.status.ok() ? use : std::vector<std::string>{};
}

}  // namespace dice::eval
