#pragma once
// `dice eval serve`: the evaluator as a local HTTP service (evaluator/SERVICE.md). A training
// process submits batches of {problem, candidate} and reads verdicts back as NDJSON while they
// finish. Batches are runs in the results store: a restarted server continues the unfinished
// ones, and a client that reconnects reads every verdict exactly once (by finish order).

#include <functional>
#include <iosfwd>
#include <stop_token>
#include <string>

#include "dice/evaluator/evaluate.h"

namespace dice::eval {

struct ServiceOptions {
  std::string host = "127.0.0.1";   ///< loopback only unless told otherwise
  int port = 8470;                  ///< 0: any free port (reported by `on_ready`)
  std::filesystem::path store_dir;  ///< results.db, logs/
  /// Server-wide settings (cache, python, jobs, device, gpus, arch, timeouts, pch, kernelbench
  /// problems) and the defaults of a batch's options (protocol, trials, warmup, seed, timing).
  EvalOptions base;
  int max_items = 100000;  ///< per batch
  int http_threads = 64;   ///< concurrent requests (each open result stream holds one)
};

/// Serves until `stop` is requested: binds host:port, continues unfinished batches, then answers
/// requests; calls `on_ready(port)` once it listens. Throws dice::InputError if the port cannot
/// be bound or the store folder is in use, dice::Error if the workers cannot start. Log lines go to
/// `log`.
void serve(const ServiceOptions& options, std::ostream& log, std::stop_token stop,
           const std::function<void(int port)>& on_ready = {});

/// The batch options of a submission: `given` (may be null) over the defaults in `base`,
/// validated. Throws dice::InputError naming the bad field.
nlohmann::json batch_options(const nlohmann::json& given, const EvalOptions& base);

}  // namespace dice::eval
