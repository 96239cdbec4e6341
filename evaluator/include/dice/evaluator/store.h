#pragma once
// The results store: every run, work item and verdict of `dice eval` (and of `dice eval serve`) in
// one embedded SQLite database, so that an interrupted run continues where it stopped and nothing
// finished is lost or recorded twice. Also holds the reference timings that are measured once per
// problem, device and software (PROTOCOL.md, "Reference timing").

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dice/core/sqlite.h"
#include "dice/evaluator/problem.h"
#include "dice/evaluator/record.h"

namespace dice::eval {

/// One run: a `dice eval` invocation or one batch of the service.
struct RunInfo {
  std::int64_t id = 0;
  std::string kind;        ///< "cli" or "batch"
  std::string state;       ///< "running", "finished", "interrupted", "cancelled"
  nlohmann::json options;  ///< what decides the results (protocol, trials, ...), as given
  std::string created_at;  ///< UTC, ISO 8601
  int total = 0;           ///< work items
  int done = 0;            ///< finished work items
};

/// One candidate of a run, with everything needed to evaluate it again (the store is enough to
/// resume: the inputs need not be read again).
struct WorkItem {
  std::int64_t id = 0;  ///< row id, unique in the store
  std::int64_t run_id = 0;
  int seq = 0;  ///< position in its run, from 0
  Problem problem;
  Candidate candidate;
  std::string options_hash;  ///< SHA-256 of the run's options
  bool done = false;
  int attempts = 0;  ///< times it was handed to a worker without finishing
};

/// A finished work item.
struct StoredRecord {
  std::int64_t item_id = 0;
  int seq = 0;
  std::int64_t finish_order = 0;  ///< position among all finished items of the store, from 1
  EvalRecord record;
};

/// The SQLite database at `path` (created with its folder if absent): WAL journal, full sync, one
/// transaction per finished record. Tables: runs, problems, items, reference_timings (schema in
/// store.cpp). Thread-safe (one connection behind a mutex); several processes may open the same
/// file (SQLite's locking, 30 s busy time-out). Throws dice::Error naming the file when the
/// database cannot be opened, is not a dice store, or a statement fails.
class ResultStore {
 public:
  explicit ResultStore(const std::filesystem::path& path);
  ~ResultStore();
  ResultStore(const ResultStore&) = delete;
  ResultStore& operator=(const ResultStore&) = delete;

  const std::filesystem::path& path() const { return path_; }

  /// Creates a run with its work items (problems stored once by content), in one transaction.
  /// `items` pairs each candidate with its problem. Returns the run id.
  std::int64_t create_run(const std::string& kind, const nlohmann::json& options,
                          const std::vector<std::pair<const Problem*, const Candidate*>>& items);

  /// The run `id`; nothing if absent.
  std::optional<RunInfo> run(std::int64_t id) const;
  /// The newest run of `kind`; nothing if none.
  std::optional<RunInfo> latest_run(const std::string& kind) const;
  /// Runs of `kind` in `state`, oldest first.
  std::vector<RunInfo> runs(const std::string& kind, const std::string& state) const;
  void set_run_state(std::int64_t run_id, const std::string& state);

  /// The work items of a run in order; only unfinished ones when `pending_only`.
  std::vector<WorkItem> items(std::int64_t run_id, bool pending_only) const;
  /// Counts one more hand-over of an item to a worker (a candidate that takes the machine down
  /// is recognised by its attempts on resume).
  void start_attempt(std::int64_t item_id);
  /// Stores the record of a finished item, in one transaction. Returns false (and stores
  /// nothing) if the item was already finished: no record is ever stored twice.
  bool finish(std::int64_t item_id, const EvalRecord& record, const std::string& worker);
  /// Finished records of a run in the order they finished.
  std::vector<StoredRecord> records(std::int64_t run_id) const;
  /// Finished records of a run with finish order above `after` (for streaming), and the highest
  /// finish order returned (or `after`).
  std::vector<StoredRecord> records_after(std::int64_t run_id, std::int64_t after,
                                          std::int64_t& last) const;
  /// The worker that finished an item ("cuda:0", "cpu#1"); empty if unfinished.
  std::string worker_of(std::int64_t item_id) const;

  /// Stored reference timing samples (ms) under `key`; nothing if none.
  std::optional<std::vector<double>> reference_timing(const std::string& key) const;
  /// Stores reference samples under `key` unless some are stored already (the first
  /// measurement wins); `about` describes the key's parts.
  void put_reference_timing(const std::string& key, const nlohmann::json& about,
                            const std::vector<double>& samples_ms);

 private:
  std::filesystem::path path_;
  std::unique_ptr<SqliteDb> db_;
  mutable std::mutex mutex_;
};

/// SHA-256 of the canonical JSON of `options` (the options hash of work items).
std::string options_hash(const nlohmann::json& options);

}  // namespace dice::eval
