#include "dice/generation/extract.h"

#include <nlohmann/json.hpp>

#include "dice/core/error.h"

namespace dice::generation {

using nlohmann::json;

namespace {

// Reads JSON lines {"text"} and answers {"code", "truncated", "from_block", "syntax_error"} with
// the evaluator's extractor; syntax_error is worded as dice_worker/analyze.py words it (its
// analyze_python calls ast.parse(code)). The protocol is private to this file.
constexpr const char* kLoop = R"py(
import ast, json, sys
from dice_worker.extract import extract_code
def syntax_error(code):
    if not code.strip():
        return None
    try:
        ast.parse(code)
    except SyntaxError as e:
        return f"SyntaxError: {e}"
    except Exception:
        return None
    return None
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    e = extract_code(json.loads(line)["text"])
    print(json.dumps({"code": e.code, "truncated": e.truncated, "from_block": e.from_block,
                      "syntax_error": syntax_error(e.code)}), flush=True)
)py";

}  // namespace

CodeExtractor::CodeExtractor(const eval::PythonEnv& env) : env_(env) {
  start();
}

void CodeExtractor::start() {
  ProcessOptions options;
  options.argv = {env_.python, "-c", kLoop};
  options.env["PYTHONPATH"] = env_.worker_path.string();
  options.env["PYTHONIOENCODING"] = "utf-8";
  options.pipe_stdin = true;
  options.pipe_stdout = true;
  process_.emplace(Process::spawn(options));
  std::string line;
  if (process_->read_line(line, Clock::now() + std::chrono::seconds(60)) !=
          Process::ReadStatus::kLine ||
      line.find("ready") == std::string::npos) {
    process_.reset();
    throw Error("code extractor (" + env_.python + " with dice_worker from " +
                env_.worker_path.string() + ") did not start: " + line);
  }
}

Extracted CodeExtractor::extract(std::string_view text) {
  const std::lock_guard lock(mutex_);
  if (!process_) start();
  process_->write_line(
      json{{"text", std::string(text)}}.dump(-1, ' ', false, json::error_handler_t::replace));
  std::string line;
  if (process_->read_line(line, Clock::now() + std::chrono::seconds(30)) !=
      Process::ReadStatus::kLine) {
    process_.reset();
    throw Error("code extractor stopped answering");
  }
  const json j = json::parse(line);
  Extracted out{j.at("code").get<std::string>(), j.at("truncated").get<bool>(),
                j.at("from_block").get<bool>(), std::nullopt};
  if (const auto& e = j.at("syntax_error"); e.is_string()) out.syntax_error = e.get<std::string>();
  return out;
}

std::string infill_candidate(std::string_view prefix, const Extracted& middle,
                             std::string_view suffix) {
  std::string out(prefix);
  out += middle.code;
  out += suffix;
  return out;
}

}  // namespace dice::generation
