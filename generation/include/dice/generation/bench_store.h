#pragma once
// The store of a `dice bench` run (OUT/bench.db, SQLite): its options, every sample (problem x
// sample index) with its prompt, output, extracted code, generation status and, once evaluated,
// its verdict, speedup and evaluator record, and the wall time of each stage. What makes a bench
// run resumable and re-reportable. Evaluation itself lives in the evaluator's store
// (OUT/eval/results.db); a sample names its evaluation run there.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dice/core/sqlite.h"

namespace dice::generation {

/// One sample of a bench run.
struct SampleRow {
  std::int64_t id = 0;     ///< row id
  std::string problem_id;  ///< "L1/19", "dice/6995"
  std::string problem_name;
  std::string level;  ///< "L1".."L3" or "other"
  int sample = 0;     ///< index among the problem's samples, from 0
  std::uint64_t seed = 0;
  /// pending (not generated yet), generated, truncated (the output ended inside a code block or
  /// at the token limit), failed (the generator gave up: `error` says why).
  std::string status = "pending";
  std::string prompt;       ///< what the generator was given (chat-templated for the engine)
  std::string output;       ///< the generated text
  std::string code;         ///< extracted code (e2e: the program; infill: the middle)
  std::string candidate;    ///< the program handed to the evaluator
  std::string stop_reason;  ///< stop, length, or the endpoint's finish_reason
  std::int64_t output_tokens = 0;
  double gen_seconds = 0;
  std::string error;
  std::optional<std::int64_t> eval_run;  ///< run id in OUT/eval/results.db
  std::optional<nlohmann::json> record;  ///< the evaluator's record once evaluated

  bool generated() const { return status == "generated" || status == "truncated"; }
  bool evaluated() const { return record.has_value(); }
  /// The record's verdict, or "" before evaluation.
  std::string verdict() const;
  /// The record's speedup, if timed.
  std::optional<double> speedup() const;
};

/// OUT/bench.db. Thread-safe (one connection behind a mutex). Every write is its own transaction,
/// so a killed run loses at most the sample in flight. Throws dice::Error naming the file when it
/// cannot be opened or a statement fails.
class BenchStore {
 public:
  explicit BenchStore(const std::filesystem::path& path);
  ~BenchStore();
  BenchStore(const BenchStore&) = delete;
  BenchStore& operator=(const BenchStore&) = delete;

  const std::filesystem::path& path() const { return path_; }

  /// The run's options (null before set_options).
  nlohmann::json options() const;
  void set_options(const nlohmann::json& options);

  /// Inserts samples as pending; (problem_id, sample) pairs already present are kept as they are.
  void add_samples(const std::vector<SampleRow>& rows);
  /// Every sample, in problem order then sample order (insertion order).
  std::vector<SampleRow> samples() const;
  /// Stores a sample's generation (status, prompt, output, code, candidate, stop reason, tokens,
  /// seconds, error), and clears any evaluation it had.
  void set_generated(const SampleRow& row);
  void set_eval_run(std::int64_t sample_id, std::int64_t eval_run);
  /// Stores the evaluator's record of a sample (verdict and speedup come from it).
  void set_record(std::int64_t sample_id, const nlohmann::json& record);

  /// Adds `seconds` to a stage's total wall time (load, generation, evaluation, ...).
  void add_stage_seconds(const std::string& stage, double seconds);
  std::map<std::string, double> stage_seconds() const;

 private:
  std::filesystem::path path_;
  std::unique_ptr<SqliteDb> db_;
  mutable std::mutex mutex_;
};

}  // namespace dice::generation
