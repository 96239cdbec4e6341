#include "dice/generation/bench_store.h"

#include "dice/core/error.h"
#include "dice/core/sqlite.h"

namespace dice::generation {

namespace fs = std::filesystem;
using nlohmann::json;

std::string SampleRow::verdict() const {
  return record ? record->value("verdict", std::string()) : std::string();
}

std::optional<double> SampleRow::speedup() const {
  if (!record || !record->contains("speedup") || !record->at("speedup").is_number())
    return std::nullopt;
  return record->at("speedup").get<double>();
}

namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS samples (
  id INTEGER PRIMARY KEY,
  problem_id TEXT NOT NULL,
  problem_name TEXT NOT NULL,
  level TEXT NOT NULL,
  sample INTEGER NOT NULL,
  seed INTEGER NOT NULL,
  status TEXT NOT NULL,
  prompt TEXT NOT NULL DEFAULT '',
  output TEXT NOT NULL DEFAULT '',
  code TEXT NOT NULL DEFAULT '',
  candidate TEXT NOT NULL DEFAULT '',
  stop_reason TEXT NOT NULL DEFAULT '',
  output_tokens INTEGER NOT NULL DEFAULT 0,
  gen_seconds REAL NOT NULL DEFAULT 0,
  error TEXT NOT NULL DEFAULT '',
  eval_run INTEGER,
  verdict TEXT,
  speedup REAL,
  record TEXT,
  UNIQUE (problem_id, sample));
CREATE TABLE IF NOT EXISTS stages (name TEXT PRIMARY KEY, seconds REAL NOT NULL);
)sql";

}  // namespace

BenchStore::BenchStore(const fs::path& path)
    : path_(path), db_(std::make_unique<SqliteDb>(path, "bench store")) {
  db_->exec(kSchema);
}

BenchStore::~BenchStore() = default;

json BenchStore::options() const {
  const std::lock_guard lock(mutex_);
  SqliteStatement s(*db_, "SELECT value FROM meta WHERE key = 'options'");
  if (!s.step()) return nullptr;
  return json::parse(s.text(0));
}

void BenchStore::set_options(const json& options) {
  const std::lock_guard lock(mutex_);
  SqliteStatement s(*db_, "INSERT OR REPLACE INTO meta (key, value) VALUES ('options', ?)");
  s.bind(1, options.dump()).step();
}

void BenchStore::add_samples(const std::vector<SampleRow>& rows) {
  const std::lock_guard lock(mutex_);
  SqliteTransaction tx(*db_);
  SqliteStatement s(*db_,
                    "INSERT OR IGNORE INTO samples (problem_id, problem_name, level, sample, seed, "
                    "status) VALUES (?, ?, ?, ?, ?, 'pending')");
  for (const auto& r : rows) {
    s.reset();
    s.bind(1, r.problem_id)
        .bind(2, r.problem_name)
        .bind(3, r.level)
        .bind(4, std::int64_t{r.sample})
        .bind(5, static_cast<std::int64_t>(r.seed))
        .step();
  }
  tx.commit();
}

std::vector<SampleRow> BenchStore::samples() const {
  const std::lock_guard lock(mutex_);
  SqliteStatement s(
      *db_,
      "SELECT id, problem_id, problem_name, level, sample, seed, status, prompt, output, code, "
      "candidate, stop_reason, output_tokens, gen_seconds, error, eval_run, record FROM samples "
      "ORDER BY id");
  std::vector<SampleRow> out;
  while (s.step()) {
    SampleRow r;
    r.id = s.integer(0);
    r.problem_id = s.text(1);
    r.problem_name = s.text(2);
    r.level = s.text(3);
    r.sample = static_cast<int>(s.integer(4));
    r.seed = static_cast<std::uint64_t>(s.integer(5));
    r.status = s.text(6);
    r.prompt = s.text(7);
    r.output = s.text(8);
    r.code = s.text(9);
    r.candidate = s.text(10);
    r.stop_reason = s.text(11);
    r.output_tokens = s.integer(12);
    r.gen_seconds = s.real(13);
    r.error = s.text(14);
    if (!s.null(15)) r.eval_run = s.integer(15);
    if (!s.null(16)) r.record = json::parse(s.text(16));
    out.push_back(std::move(r));
  }
  return out;
}

void BenchStore::set_generated(const SampleRow& r) {
  const std::lock_guard lock(mutex_);
  SqliteStatement s(
      *db_,
      "UPDATE samples SET status = ?, prompt = ?, output = ?, code = ?, candidate = ?, "
      "stop_reason = ?, output_tokens = ?, gen_seconds = ?, error = ?, eval_run = NULL, "
      "verdict = NULL, speedup = NULL, record = NULL WHERE id = ?");
  s.bind(1, r.status)
      .bind(2, r.prompt)
      .bind(3, r.output)
      .bind(4, r.code)
      .bind(5, r.candidate)
      .bind(6, r.stop_reason)
      .bind(7, r.output_tokens)
      .bind(8, r.gen_seconds)
      .bind(9, r.error)
      .bind(10, r.id)
      .step();
}

void BenchStore::set_eval_run(std::int64_t sample_id, std::int64_t eval_run) {
  const std::lock_guard lock(mutex_);
  SqliteStatement s(*db_, "UPDATE samples SET eval_run = ? WHERE id = ?");
  s.bind(1, eval_run).bind(2, sample_id).step();
}

void BenchStore::set_record(std::int64_t sample_id, const json& record) {
  const std::lock_guard lock(mutex_);
  SqliteStatement s(*db_, "UPDATE samples SET record = ?, verdict = ?, speedup = ? WHERE id = ?");
  s.bind(1, record.dump(-1, ' ', false, json::error_handler_t::replace))
      .bind(2, record.value("verdict", std::string()));
  if (record.contains("speedup") && record.at("speedup").is_number())
    s.bind(3, record.at("speedup").get<double>());
  else
    s.bind_null(3);
  s.bind(4, sample_id).step();
}

void BenchStore::add_stage_seconds(const std::string& stage, double seconds) {
  const std::lock_guard lock(mutex_);
  SqliteStatement s(
      *db_,
      "INSERT INTO stages (name, seconds) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET "
      "seconds = seconds + excluded.seconds");
  s.bind(1, stage).bind(2, seconds).step();
}

std::map<std::string, double> BenchStore::stage_seconds() const {
  const std::lock_guard lock(mutex_);
  SqliteStatement s(*db_, "SELECT name, seconds FROM stages");
  std::map<std::string, double> out;
  while (s.step()) out[s.text(0)] = s.real(1);
  return out;
}

}  // namespace dice::generation
