#include "dice/evaluator/prepare.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "dice/core/error.h"
#include "dice/core/files.h"
#include "dice/core/hash.h"
#include "dice/core/process.h"

namespace dice::eval {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr int kCaptureVersion = 1;  // bump when capture's output changes
constexpr std::size_t kLogTail = 6000;

std::string last_json_line(const std::string& output) {
  std::size_t end = output.size();
  while (end > 0) {
    while (end > 0 && output[end - 1] == '\n') --end;
    const auto start = output.rfind('\n', end == 0 ? 0 : end - 1);
    const std::size_t from = start == std::string::npos ? 0 : start + 1;
    const std::string line = output.substr(from, end - from);
    if (!line.empty() && line.front() == '{') return line;
    if (from == 0) break;
    end = from;
  }
  return {};
}
json object_detail(const ObjectOutcome& o) {
  return {{"status", o.status},
          {"pch", o.pch},
          {"compiler", o.compiler},
          {"seconds", o.seconds},
          {"cpu_seconds", o.cpu_seconds}};
}

json build_detail(const ExtensionSpec& spec, const BuildResult& b) {
  return {{"name", spec.name},
          {"key", b.key},
          {"cached", b.cached},
          {"main", object_detail(b.main)},
          {"cuda", object_detail(b.cuda)},
          {"link_seconds", b.link_seconds},
          {"link_cpu_seconds", b.link_cpu_seconds},
          {"seconds", b.seconds}};
}
}  // namespace

CandidatePreparer::CandidatePreparer(PythonEnv env, ExtensionBuilder& builder, fs::path cache_dir,
                                     std::string torch_version,
                                     std::chrono::seconds capture_timeout)
    : env_(std::move(env)),
      builder_(builder),
      cache_dir_(std::move(cache_dir)),
      torch_version_(std::move(torch_version)),
      capture_timeout_(capture_timeout) {}

PreparedCandidate CandidatePreparer::prepare(const Candidate& candidate) {
  PreparedCandidate out;
  const auto start = Clock::now();
  const std::string text_hash = sha256_hex(candidate.text);
  const std::string key =
      sha256_hex(fmt::format("{}\n{}\n{}", kCaptureVersion, torch_version_, text_hash));
  const fs::path dir = cache_dir_ / "candidates" / key;
  const fs::path capture_path = dir / "capture.json";
  out.code_path = dir / "code.py";
  out.code_hash = "sha256:" + text_hash;

  json capture;
  if (fs::exists(capture_path)) {
    try {
      capture = json::parse(read_file(capture_path));
    } catch (const std::exception&) {
      capture = json();
    }
  }
  if (capture.is_null()) {
    write_file_atomic(dir / "raw.txt", candidate.text);
    ProcessOptions options{
        .argv = env_.argv({"capture", (dir / "raw.txt").string(), out.code_path.string()})};
    options.env["PYTHONPATH"] = env_.worker_path.string();
    options.env["CUDA_VISIBLE_DEVICES"] = "";
    options.cwd = dir;
    const auto r = run_command(options, capture_timeout_);
    const std::string line = last_json_line(r.output);
    if (r.timed_out) {
      out.failed = Verdict::kTimeout;
      out.reasons.push_back(fmt::format("loading the candidate module took more than {} s",
                                        capture_timeout_.count()));
      out.log_tail = tail_text(r.output, kLogTail);
      out.compile_status = "skipped";
      return out;
    }
    try {
      capture = json::parse(line);
    } catch (const json::exception&) {
      out.failed = Verdict::kImportError;
      out.reasons.push_back("loading the candidate module killed its process: " +
                            r.status.describe());
      out.log_tail = tail_text(r.output, kLogTail);
      out.compile_status = "skipped";
      return out;
    }
    write_file_atomic(capture_path, capture.dump());
  }

  if (capture.contains("code_sha256")) out.code_hash = "sha256:" + capture.value("code_sha256", "");
  if (!capture.value("ok", false)) {
    const auto verdict = parse_verdict(capture.value("verdict", "import_error"));
    out.failed = verdict.value_or(Verdict::kImportError);
    out.reasons.push_back(capture.value("error", "the candidate could not be loaded"));
    out.log_tail = capture.value("log_tail", "");
    out.compile_status = "skipped";
    return out;
  }

  const json extensions = capture.value("extensions", json::array());
  out.compile_status = extensions.empty() ? "none" : "cached";
  for (const auto& e : extensions) {
    ExtensionSpec spec;
    try {
      spec = ExtensionSpec::from_json(e);
    } catch (const Error& err) {
      out.failed = Verdict::kCompileError;
      out.reasons.emplace_back(err.what());
      out.compile_status = "failed";
      break;
    }
    const BuildResult built = builder_.build(spec);
    out.build_detail.push_back(build_detail(spec, built));
    if (!built.cached) out.compile_status = "built";
    if (!built.ok) {
      out.failed = built.timed_out ? Verdict::kTimeout : Verdict::kCompileError;
      out.reasons.push_back(
          built.timed_out ? fmt::format("compiling extension {} ran past its limit", spec.name)
                          : fmt::format("extension {} failed to build", spec.name));
      out.log_tail = built.log_tail;
      out.compile_status = built.timed_out ? "timeout" : "failed";
      break;
    }
    out.extensions[spec.digest] = built.module_path;
  }
  out.compile_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

}  // namespace dice::eval
