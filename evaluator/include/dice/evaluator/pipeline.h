#pragma once
// The evaluation pipeline shared by `dice eval` and `dice eval serve`: work items from the results
// store go through the CPU stage (capture and build, `jobs` at a time) and the GPU stage (one
// worker per device, fed from one queue so that every device stays busy); each verdict is
// committed to the store, then handed to a sink. Compilation overlaps GPU work.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "dice/core/blocking_queue.h"
#include "dice/evaluator/builder.h"
#include "dice/evaluator/prepare.h"
#include "dice/evaluator/rules.h"
#include "dice/evaluator/sandbox.h"
#include "dice/evaluator/store.h"
#include "dice/evaluator/toolchain.h"
#include "dice/evaluator/worker.h"

namespace dice::eval {

/// How the pipeline runs (not what decides results: that is each job's options).
struct PipelineConfig {
  PythonEnv python;
  std::filesystem::path cache_dir;  ///< builds, captures, problem files
  std::filesystem::path log_dir;    ///< worker-<slot>.log
  /// One worker each: "cuda:0", "cuda:1", or "cpu" (several "cpu" entries: several CPU workers,
  /// which stand in for GPUs in tests). Empty: compile only, verdict `compiled`.
  std::vector<std::string> devices;
  std::string device_note;  ///< the reason given with `compiled` verdicts
  int jobs = 1;             ///< candidates in the CPU stage at once
  BuildOptions build;
  std::chrono::seconds capture_timeout{120};
  StageTimeouts stages;
  /// Time the reference with every candidate instead of using stored samples.
  bool fresh_reference_timing = false;
  /// Isolation of captures and workers (Sandbox); `workers` is set from `devices`.
  SandboxOptions sandbox;
  /// A work item handed to a worker this many times without finishing (the run was interrupted
  /// while it ran, every time) gets the verdict runtime_error instead of another try.
  int max_attempts = 3;
};

/// A work item and the options of its run: {"protocol", "seed", "correct_trials",
/// "timing_trials", "warmup", "measure_timing"} (PROTOCOL.md, the worker's "options"), and the
/// rules: {"policy", "rule_overrides": ["ID=action", ...], "static_only"} (RULES.md).
struct Job {
  WorkItem item;
  nlohmann::json options;
};

/// Called after a record was committed to the store, from pipeline threads (concurrently).
using RecordSink = std::function<void(const Job&, const EvalRecord&)>;

/// The running pipeline. submit() jobs, wait_idle() for them; cancel() stops at once: compilers,
/// captures and workers are killed, and whatever had not been committed stays pending in the
/// store for a later resume. Destruction cancels what is left.
class Pipeline {
 public:
  /// Throws dice::InputError on a bad build option (arch, compiler).
  Pipeline(const Toolchain& toolchain, PipelineConfig config, ResultStore& store, RecordSink sink);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  /// Queues jobs (in order; the CPU stage takes them first come, first served).
  void submit(std::vector<Job> jobs);
  /// Blocks until every submitted job is finished (true), or the pipeline was cancelled or failed
  /// (false; see error()).
  bool wait_idle();
  /// Stops everything (thread-safe, idempotent; callable from a signal-watching thread).
  void cancel();
  bool cancelled() const { return cancelled_.load(); }
  /// Why the pipeline failed (a worker that cannot start three times); empty otherwise.
  std::string error() const;
  /// Jobs submitted and jobs finished so far.
  std::size_t submitted() const;
  std::size_t finished() const;

  /// How captures and workers are isolated (Sandbox::isolation) before any worker started.
  const std::string& isolation() const { return sandbox_.isolation(); }

  /// The store key of a reference timing: SHA-256 of `about` =
  /// {problem (SHA-256 of its code), device name, protocol, seed, timing_trials, warmup, torch,
  /// cuda, driver, fresh_inputs (timed with new inputs every call: protocol dice with
  /// dynamic.stale_output on), tf32 (cuDNN TF32 on: protocol kernelbench)}.
  static nlohmann::json reference_about(const Problem& problem, const nlohmann::json& options,
                                        const nlohmann::json& ready_event);

 private:
  struct GpuTask;
  void cpu_loop();
  void gpu_loop(std::size_t slot);
  void run_on_worker(WorkerClient& worker, const std::string& label, GpuTask& task);
  void complete(const Job& job, EvalRecord record, const std::string& worker);
  EvalRecord record_of(const Job& job, const PreparedCandidate& prep) const;
  void drop(std::size_t n = 1);
  std::filesystem::path problem_file(const Problem& problem);

  const Toolchain toolchain_;
  PipelineConfig config_;
  ResultStore& store_;
  RecordSink sink_;
  ExtensionBuilder builder_;
  Sandbox sandbox_;
  CandidatePreparer preparer_;
  BlockingQueue<Job> cpu_queue_;
  std::unique_ptr<BlockingQueue<GpuTask>> gpu_queue_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  std::size_t submitted_ = 0, finished_ = 0;
  std::string error_;
  std::vector<std::jthread> threads_;  // last: joined before the members above go
};

}  // namespace dice::eval
