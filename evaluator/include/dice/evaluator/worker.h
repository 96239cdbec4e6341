#pragma once
// Supervision of one Python GPU worker (`python -m dice_worker serve`) speaking the JSON-lines
// protocol of evaluator/PROTOCOL.md. A candidate that kills or hangs its worker becomes a verdict;
// the next request starts a fresh worker.

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "dice/core/process.h"
#include "dice/evaluator/record.h"
#include "dice/evaluator/sandbox.h"
#include "dice/evaluator/toolchain.h"

namespace dice::eval {

/// Time limits of a request's stages (PROTOCOL.md: load, correctness, timing).
struct StageTimeouts {
  std::chrono::seconds start{180};  ///< worker start-up until "ready"
  std::chrono::seconds load{300};
  std::chrono::seconds correctness{300};
  std::chrono::seconds timing{600};
};

/// What came of one request.
struct WorkerReply {
  /// The worker's "result" event; empty when the worker died or timed out.
  std::optional<nlohmann::json> result;
  Verdict verdict = Verdict::kRuntimeError;  ///< when `result` is empty: kTimeout or kRuntimeError
  std::string reason;                        ///< when `result` is empty: what happened
  std::string log_tail;                      ///< the worker's stderr during this request
  std::string rule;  ///< when a sandbox limit decided (verdict kRejected): sandbox.processes, ...
  int signal = 0;    ///< when the worker died: the signal that ended it (9: killed from outside?)
};

/// One worker process bound to one device ("cuda:0", "cpu"), started lazily and restarted after
/// it dies. Not thread-safe: one thread drives one client.
class WorkerClient {
 public:
  /// With `sandbox`, the worker runs isolated (bubblewrap when it works; a worker that cannot
  /// start under it is started again without, and isolation() says so) and each request is
  /// watched against Sandbox::worker_limits().
  WorkerClient(PythonEnv env, std::string device, std::filesystem::path log_path,
               StageTimeouts timeouts, const Sandbox* sandbox = nullptr);
  ~WorkerClient();
  WorkerClient(const WorkerClient&) = delete;
  WorkerClient& operator=(const WorkerClient&) = delete;

  /// Sends an "evaluate" request (its "id" is set here) and waits for the result under the stage
  /// time limits. Throws dice::Error only if the worker cannot be started three times in a row.
  WorkerReply evaluate(nlohmann::json request);

  /// Starts the worker if it is not running, as evaluate() does first. Returns false if it did
  /// not start; throws dice::Error when that happened three times in a row.
  bool ensure_started();

  /// The device's name as the worker reported it ("NVIDIA H100 80GB HBM3"); empty before start.
  const std::string& device_name() const { return device_name_; }
  /// The worker's "ready" event (device_name, torch, cuda, driver: PROTOCOL.md); null before.
  const nlohmann::json& ready_event() const { return ready_; }
  /// How many times a worker process was started.
  int starts() const { return starts_; }
  /// How the worker runs: Sandbox::isolation(), its fallback, or "none: no sandbox".
  const std::string& isolation() const { return isolation_; }

 private:
  void start();
  void stop();
  void drop_process();
  std::string log_since(std::uintmax_t offset) const;

  PythonEnv env_;
  std::string device_;
  std::filesystem::path log_path_;
  StageTimeouts timeouts_;
  const Sandbox* sandbox_;
  bool use_bwrap_ = true;
  std::string isolation_ = "none: no sandbox";
  std::optional<SandboxLease> lease_;  // outlives process_ (declared first)
  std::optional<Process> process_;
  std::string device_name_;
  nlohmann::json ready_;
  int starts_ = 0;
  int failed_starts_ = 0;
  long next_id_ = 1;
};

}  // namespace dice::eval
