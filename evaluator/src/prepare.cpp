#include "dice/evaluator/prepare.h"

#include <fmt/format.h>

#include <fmt/ranges.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include "dice/core/error.h"
#include "dice/core/files.h"
#include "dice/core/hash.h"
#include "dice/core/process.h"

namespace dice::eval {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr int kCaptureVersion = 2;  // bump when the steps' output changes
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
  return {{"status", o.status}, {"pch", o.pch},         {"compiler", o.compiler},
          {"header", o.header}, {"seconds", o.seconds}, {"cpu_seconds", o.cpu_seconds}};
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
                                     std::chrono::seconds capture_timeout, PrepareChecks checks)
    : env_(std::move(env)),
      builder_(builder),
      cache_dir_(std::move(cache_dir)),
      torch_version_(std::move(torch_version)),
      capture_timeout_(capture_timeout),
      checks_(checks) {}

json CandidatePreparer::run_step(const std::vector<std::string>& args, const fs::path& dir,
                                 bool sandboxed, PreparedCandidate& out) {
  ProcessOptions options{.argv = env_.argv(args)};
  options.env["PYTHONPATH"] = fs::absolute(env_.worker_path).string();
  options.env["CUDA_VISIBLE_DEVICES"] = "";
  options.cwd = dir;
  std::optional<SandboxLease> lease;
  TreeLimits limits;
  if (sandboxed && checks_.sandbox != nullptr) {
    lease.emplace(checks_.sandbox->wrap(options));
    limits = checks_.sandbox->capture_limits(capture_timeout_);
  }
  const auto watched = run_watched(options, capture_timeout_, limits);
  const auto& r = watched.command;
  const std::string what = args.front();
  const auto fail = [&](Verdict v, std::string reason) {
    out.failed = v;
    out.reasons.push_back(std::move(reason));
    out.log_tail = tail_text(r.output, kLogTail);
    out.compile_status = "skipped";
    return json();
  };
  if (watched.violation) {
    switch (watched.violation->kind) {
      case Violation::Kind::kMemory:
        return fail(Verdict::kOutOfMemory,
                    "loading the candidate module: " + watched.violation->reason);
      case Violation::Kind::kCpu:
        return fail(Verdict::kTimeout,
                    "loading the candidate module: " + watched.violation->reason);
      case Violation::Kind::kTasks:
        out.findings.push_back(
            {"sandbox.processes", RuleAction::kReject, watched.violation->reason, 0, "capture"});
        return fail(Verdict::kRejected,
                    "loading the candidate module: " + watched.violation->reason);
    }
  }
  if (r.timed_out)
    return fail(Verdict::kTimeout, fmt::format("{} of the candidate took more than {} s", what,
                                               capture_timeout_.count()));
  if (!r.status.exited && r.status.signal == SIGXFSZ) {
    out.findings.push_back({"sandbox.file_size", RuleAction::kReject,
                            "wrote a file larger than the sandbox allows", 0, "capture"});
    return fail(Verdict::kRejected, "loading the candidate module: file size limit");
  }
  try {
    json j = json::parse(last_json_line(r.output));
    if (j.is_object()) return j;
  } catch (const json::exception&) {
  }
  return fail(
      Verdict::kImportError,
      fmt::format("{} of the candidate module killed its process: {}", what, r.status.describe()));
}

PreparedCandidate CandidatePreparer::prepare(const Candidate& candidate, const RulePolicy* rules,
                                             bool static_only) {
  PreparedCandidate out;
  const auto start = Clock::now();
  const RulePolicy& policy = candidate.reference         ? rules_off_
                             : rules != nullptr          ? *rules
                             : checks_.policy != nullptr ? *checks_.policy
                                                         : rules_off_;
  if (checks_.sandbox != nullptr) out.isolation = checks_.sandbox->isolation();
  const std::string text_hash = sha256_hex(candidate.text);
  const std::string key =
      sha256_hex(fmt::format("{}\n{}\n{}", kCaptureVersion, torch_version_, text_hash));
  std::shared_ptr<std::mutex> key_lock;
  {
    const std::lock_guard lock(key_locks_mutex_);
    auto& slot = key_locks_[key];
    if (!slot) slot = std::make_shared<std::mutex>();
    key_lock = slot;
  }
  const std::lock_guard same_candidate(*key_lock);
  const fs::path dir = fs::absolute(cache_dir_ / "candidates" / key);
  out.code_path = dir / "code.py";
  out.code_hash = "sha256:" + text_hash;
  // Each step's record is cached by content; a failed or killed step is not.
  const auto cached = [&](const fs::path& path, const auto& compute) {
    if (fs::exists(path)) {
      try {
        return json::parse(read_file(path));
      } catch (const std::exception&) {
      }
    }
    json j = compute();
    if (!j.is_null()) write_file_atomic(path, j.dump());
    return j;
  };
  const auto apply_findings = [&](const json& raw) {
    auto found = resolve_findings(raw, policy);
    out.findings.insert(out.findings.end(), found.begin(), found.end());
    const auto rejecting = rejecting_rules(out.findings);
    if (rejecting.empty()) return false;
    out.failed = Verdict::kRejected;
    out.reasons.push_back(
        fmt::format("rejected under policy {} by {}", policy.name(), fmt::join(rejecting, ", ")));
    out.compile_status = "skipped";
    return true;
  };

  // 1. Extraction and the Python rules (no candidate code runs).
  const json analysis = cached(dir / "analysis.json", [&] {
    write_file_atomic(dir / "raw.txt", candidate.text);
    return run_step({"analyze", (dir / "raw.txt").string(), out.code_path.string()}, dir, false,
                    out);
  });
  if (out.failed) return out;
  if (analysis.contains("code_sha256"))
    out.code_hash = "sha256:" + analysis.value("code_sha256", "");
  if (!analysis.value("ok", false)) {
    out.failed =
        parse_verdict(analysis.value("verdict", "parse_error")).value_or(Verdict::kParseError);
    out.reasons.push_back(analysis.value("error", "the candidate could not be read"));
    out.compile_status = "skipped";
    return out;
  }
  if (apply_findings(analysis.value("findings", json::array()))) return out;

  // 2. The capture: the candidate's module runs, sandboxed, with load_inline recorded.
  const json capture = cached(dir / "capture.json", [&] {
    return run_step({"capture", out.code_path.string()}, dir, true, out);
  });
  if (out.failed) return out;
  if (!capture.value("ok", false)) {
    out.failed =
        parse_verdict(capture.value("verdict", "import_error")).value_or(Verdict::kImportError);
    out.reasons.push_back(capture.value("error", "the candidate could not be loaded"));
    out.log_tail = capture.value("log_tail", "");
    out.compile_status = "skipped";
    return out;
  }

  // 3. The CUDA/C++ rules over the captured sources (no candidate code runs).
  const json scanned = cached(dir / "scan.json", [&] {
    return run_step({"scan", (dir / "capture.json").string()}, dir, false, out);
  });
  if (out.failed) return out;
  for (const auto& k : scanned.value("kernels", json::array()))
    if (k.is_string()) out.kernels.push_back(k.get<std::string>());
  if (apply_findings(scanned.value("findings", json::array()))) return out;
  if (static_only || checks_.static_only) {
    out.failed = Verdict::kCaptured;
    out.reasons.emplace_back("--static-only: passed the static rules; not built");
    out.compile_status = "skipped";
    return out;
  }

  // 4. The build.
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
