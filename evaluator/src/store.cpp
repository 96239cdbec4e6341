#include "dice/evaluator/store.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <optional>

#include "dice/core/error.h"
#include "dice/core/hash.h"
#include "dice/core/sqlite.h"

namespace dice::eval {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kSchemaVersion = 2;  // 2: items.reference

// One table per concern; records are kept as the JSON of evaluator/README.md.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  state TEXT NOT NULL,
  options TEXT NOT NULL,
  options_hash TEXT NOT NULL,
  created_at TEXT NOT NULL,
  finished_at TEXT);
CREATE TABLE IF NOT EXISTS problems (
  hash TEXT PRIMARY KEY,
  id TEXT NOT NULL,
  name TEXT NOT NULL,
  level INTEGER NOT NULL,
  code TEXT NOT NULL,
  origin TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  seq INTEGER NOT NULL,
  problem_hash TEXT NOT NULL REFERENCES problems(hash),
  candidate_label TEXT NOT NULL,
  candidate_text TEXT NOT NULL,
  candidate_hash TEXT NOT NULL,
  options_hash TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT 'pending',
  attempts INTEGER NOT NULL DEFAULT 0,
  verdict TEXT,
  record TEXT,
  worker TEXT,
  finish_order INTEGER UNIQUE,
  finished_at TEXT,
  reference INTEGER NOT NULL DEFAULT 0,
  UNIQUE (run_id, seq));
CREATE INDEX IF NOT EXISTS items_by_run ON items (run_id, state);
CREATE TABLE IF NOT EXISTS reference_timings (
  key TEXT PRIMARY KEY,
  about TEXT NOT NULL,
  samples_ms TEXT NOT NULL,
  created_at TEXT NOT NULL);
)sql";

std::string now_utc() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

std::string problem_hash(const Problem& p) {
  return sha256_hex(
      json{{"id", p.id}, {"name", p.name}, {"level", p.level}, {"code", p.code}}.dump());
}

}  // namespace

std::string options_hash(const json& options) {
  return sha256_hex(options.dump());
}

ResultStore::ResultStore(const fs::path& path) : path_(path) {
  // WAL, synchronous=FULL (SqliteDb): a committed verdict survives a machine restart.
  db_ = std::make_unique<SqliteDb>(path, "results database");
  db_->exec("PRAGMA foreign_keys=ON");
  SqliteTransaction tx(*db_);
  db_->exec(kSchema);
  std::optional<std::string> schema;
  {
    SqliteStatement q(*db_, "SELECT value FROM meta WHERE key = 'schema'");
    if (q.step()) schema = q.text(0);
  }
  if (!schema) {
    SqliteStatement put(*db_, "INSERT INTO meta (key, value) VALUES ('schema', ?)");
    put.bind(1, std::to_string(kSchemaVersion)).step();
  } else if (*schema == "1") {
    // Schema 1 (before the rules) lacks items.reference; its runs that evaluated references
    // (--reference-as-candidate) named those items so.
    db_->exec(
        "ALTER TABLE items ADD COLUMN reference INTEGER NOT NULL DEFAULT 0;"
        "UPDATE items SET reference = 1 WHERE candidate_label LIKE '% (reference as candidate)';"
        "UPDATE meta SET value = '2' WHERE key = 'schema';");
  } else if (*schema != std::to_string(kSchemaVersion)) {
    throw Error(fmt::format("results database {} has schema {}, this dice reads {}", path.string(),
                            *schema, kSchemaVersion));
  }
  tx.commit();
}

ResultStore::~ResultStore() = default;

std::int64_t ResultStore::create_run(
    const std::string& kind, const json& options,
    const std::vector<std::pair<const Problem*, const Candidate*>>& items) {
  const std::lock_guard lock(mutex_);
  const std::string opts_hash = options_hash(options);
  SqliteTransaction tx(*db_);
  SqliteStatement run(*db_,
                      "INSERT INTO runs (kind, state, options, options_hash, created_at) "
                      "VALUES (?, 'running', ?, ?, ?)");
  run.bind(1, kind).bind(2, options.dump()).bind(3, opts_hash).bind(4, now_utc()).step();
  const std::int64_t run_id = db_->last_insert_rowid();
  SqliteStatement problem(*db_,
                          "INSERT OR IGNORE INTO problems (hash, id, name, level, code, origin) "
                          "VALUES (?, ?, ?, ?, ?, ?)");
  SqliteStatement item(
      *db_,
      "INSERT INTO items (run_id, seq, problem_hash, candidate_label, candidate_text, "
      "candidate_hash, options_hash, reference) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  int seq = 0;
  for (const auto& [p, c] : items) {
    const std::string ph = problem_hash(*p);
    problem.reset();
    problem.bind(1, ph).bind(2, p->id).bind(3, p->name).bind(4, p->level).bind(5, p->code);
    problem.bind(6, p->origin).step();
    item.reset();
    item.bind(1, run_id).bind(2, seq++).bind(3, ph).bind(4, c->label).bind(5, c->text);
    item.bind(6, "sha256:" + sha256_hex(c->text)).bind(7, opts_hash);
    item.bind(8, c->reference ? 1 : 0).step();
  }
  tx.commit();
  return run_id;
}

namespace {
constexpr const char* kRunColumns =
    "SELECT r.id, r.kind, r.state, r.options, r.created_at, "
    "(SELECT COUNT(*) FROM items i WHERE i.run_id = r.id), "
    "(SELECT COUNT(*) FROM items i WHERE i.run_id = r.id AND i.state = 'done') FROM runs r ";

template <typename Stmt>
RunInfo run_from(const Stmt& q) {
  RunInfo r;
  r.id = q.integer(0);
  r.kind = q.text(1);
  r.state = q.text(2);
  r.options = json::parse(q.text(3));
  r.created_at = q.text(4);
  r.total = static_cast<int>(q.integer(5));
  r.done = static_cast<int>(q.integer(6));
  return r;
}
}  // namespace

std::optional<RunInfo> ResultStore::run(std::int64_t id) const {
  const std::lock_guard lock(mutex_);
  SqliteStatement q(*db_, (std::string(kRunColumns) + "WHERE r.id = ?").c_str());
  q.bind(1, id);
  if (!q.step()) return std::nullopt;
  return run_from(q);
}

std::optional<RunInfo> ResultStore::latest_run(const std::string& kind) const {
  const std::lock_guard lock(mutex_);
  SqliteStatement q(
      *db_, (std::string(kRunColumns) + "WHERE r.kind = ? ORDER BY r.id DESC LIMIT 1").c_str());
  q.bind(1, kind);
  if (!q.step()) return std::nullopt;
  return run_from(q);
}

std::vector<RunInfo> ResultStore::runs(const std::string& kind, const std::string& state) const {
  const std::lock_guard lock(mutex_);
  SqliteStatement q(
      *db_, (std::string(kRunColumns) + "WHERE r.kind = ? AND r.state = ? ORDER BY r.id").c_str());
  q.bind(1, kind).bind(2, state);
  std::vector<RunInfo> out;
  while (q.step()) out.push_back(run_from(q));
  return out;
}

void ResultStore::set_run_state(std::int64_t run_id, const std::string& state) {
  const std::lock_guard lock(mutex_);
  SqliteStatement q(*db_,
                    "UPDATE runs SET state = ?, finished_at = CASE WHEN ? = 'running' THEN NULL "
                    "ELSE ? END WHERE id = ?");
  q.bind(1, state).bind(2, state).bind(3, now_utc()).bind(4, run_id).step();
}

std::vector<WorkItem> ResultStore::items(std::int64_t run_id, bool pending_only) const {
  const std::lock_guard lock(mutex_);
  SqliteStatement q(
      *db_, pending_only
                ? "SELECT i.id, i.seq, i.candidate_label, i.candidate_text, i.options_hash, "
                  "i.state, i.attempts, p.id, p.name, p.level, p.code, p.origin, i.reference FROM "
                  "items i "
                  "JOIN problems p ON p.hash = i.problem_hash WHERE i.run_id = ? AND "
                  "i.state = 'pending' ORDER BY i.seq"
                : "SELECT i.id, i.seq, i.candidate_label, i.candidate_text, i.options_hash, "
                  "i.state, i.attempts, p.id, p.name, p.level, p.code, p.origin, i.reference FROM "
                  "items i "
                  "JOIN problems p ON p.hash = i.problem_hash WHERE i.run_id = ? ORDER BY i.seq");
  q.bind(1, run_id);
  std::vector<WorkItem> out;
  while (q.step()) {
    WorkItem w;
    w.id = q.integer(0);
    w.run_id = run_id;
    w.seq = static_cast<int>(q.integer(1));
    w.candidate.label = q.text(2);
    w.candidate.text = q.text(3);
    w.options_hash = q.text(4);
    w.done = q.text(5) == "done";
    w.attempts = static_cast<int>(q.integer(6));
    w.problem.id = q.text(7);
    w.problem.name = q.text(8);
    w.problem.level = static_cast<int>(q.integer(9));
    w.problem.code = q.text(10);
    w.problem.origin = q.text(11);
    w.candidate.problem_id = w.problem.id;
    w.candidate.reference = q.integer(12) != 0;
    out.push_back(std::move(w));
  }
  return out;
}

void ResultStore::start_attempt(std::int64_t item_id) {
  const std::lock_guard lock(mutex_);
  SqliteStatement q(*db_,
                    "UPDATE items SET attempts = attempts + 1 WHERE id = ? AND state = 'pending'");
  q.bind(1, item_id).step();
}

bool ResultStore::finish(std::int64_t item_id, const EvalRecord& record,
                         const std::string& worker) {
  const std::lock_guard lock(mutex_);
  SqliteTransaction tx(*db_);
  SqliteStatement q(
      *db_,
      "UPDATE items SET state = 'done', verdict = ?, record = ?, worker = ?, "
      "finished_at = ?, finish_order = (SELECT COALESCE(MAX(finish_order), 0) + 1 FROM "
      "items) WHERE id = ? AND state = 'pending'");
  q.bind(1, std::string(to_string(record.verdict)))
      .bind(2, record.to_json().dump())
      .bind(3, worker)
      .bind(4, now_utc())
      .bind(5, item_id)
      .step();
  const bool stored = q.changes() == 1;
  tx.commit();
  return stored;
}

namespace {
template <typename Stmt>
StoredRecord stored_from(const Stmt& q) {
  StoredRecord s;
  s.item_id = q.integer(0);
  s.seq = static_cast<int>(q.integer(1));
  s.record = EvalRecord::from_json(json::parse(q.text(2)));
  s.finish_order = q.integer(3);
  return s;
}
}  // namespace

std::vector<StoredRecord> ResultStore::records(std::int64_t run_id) const {
  std::int64_t last = 0;
  return records_after(run_id, 0, last);
}

std::vector<StoredRecord> ResultStore::records_after(std::int64_t run_id, std::int64_t after,
                                                     std::int64_t& last) const {
  const std::lock_guard lock(mutex_);
  SqliteStatement q(
      *db_,
      "SELECT id, seq, record, finish_order FROM items WHERE run_id = ? AND state = 'done' "
      "AND finish_order > ? ORDER BY finish_order");
  q.bind(1, run_id).bind(2, after);
  std::vector<StoredRecord> out;
  last = after;
  while (q.step()) {
    out.push_back(stored_from(q));
    last = q.integer(3);
  }
  return out;
}

std::string ResultStore::worker_of(std::int64_t item_id) const {
  const std::lock_guard lock(mutex_);
  SqliteStatement q(*db_, "SELECT worker FROM items WHERE id = ?");
  q.bind(1, item_id);
  return q.step() ? q.text(0) : std::string();
}

std::optional<std::vector<double>> ResultStore::reference_timing(const std::string& key) const {
  const std::lock_guard lock(mutex_);
  SqliteStatement q(*db_, "SELECT samples_ms FROM reference_timings WHERE key = ?");
  q.bind(1, key);
  if (!q.step()) return std::nullopt;
  return json::parse(q.text(0)).get<std::vector<double>>();
}

void ResultStore::put_reference_timing(const std::string& key, const json& about,
                                       const std::vector<double>& samples_ms) {
  const std::lock_guard lock(mutex_);
  SqliteStatement q(*db_,
                    "INSERT OR IGNORE INTO reference_timings (key, about, samples_ms, created_at) "
                    "VALUES (?, ?, ?, ?)");
  q.bind(1, key).bind(2, about.dump()).bind(3, json(samples_ms).dump()).bind(4, now_utc()).step();
}

}  // namespace dice::eval
