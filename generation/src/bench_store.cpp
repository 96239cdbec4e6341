#include "dice/generation/bench_store.h"

#include <sqlite3.h>

#include "dice/core/error.h"

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

struct BenchStore::Db {
  sqlite3* handle = nullptr;
  fs::path path;
  ~Db() { sqlite3_close(handle); }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("bench store " + path.string() + ": " + what + ": " + sqlite3_errmsg(handle));
  }
  void exec(const char* sql) const {
    char* message = nullptr;
    if (sqlite3_exec(handle, sql, nullptr, nullptr, &message) != SQLITE_OK) {
      const std::string m = message != nullptr ? message : "";
      sqlite3_free(message);
      throw Error("bench store " + path.string() + ": " + m);
    }
  }
};

namespace {

/// A prepared statement with positional binding (from 1).
class Stmt {
 public:
  Stmt(const BenchStore& store, sqlite3* db, const char* sql) : db_(db), store_(store) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK)
      throw Error("bench store " + store.path().string() + ": " + sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  Stmt& bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, std::int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  Stmt& bind_null(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  /// True while rows come; throws on error.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw Error("bench store " + store_.path().string() + ": " + sqlite3_errmsg(db_));
  }
  std::string text(int c) const {
    const auto* p = sqlite3_column_text(stmt_, c);
    return p != nullptr ? std::string(reinterpret_cast<const char*>(p),
                                      static_cast<std::size_t>(sqlite3_column_bytes(stmt_, c)))
                        : std::string();
  }
  std::int64_t integer(int c) const { return sqlite3_column_int64(stmt_, c); }
  double real(int c) const { return sqlite3_column_double(stmt_, c); }
  bool null(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }

 private:
  sqlite3* db_;
  const BenchStore& store_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace

BenchStore::BenchStore(const fs::path& path) : path_(path), db_(std::make_unique<Db>()) {
  db_->path = path;
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  if (sqlite3_open(path.c_str(), &db_->handle) != SQLITE_OK) db_->fail("cannot open");
  sqlite3_busy_timeout(db_->handle, 30000);
  db_->exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;");
  db_->exec(kSchema);
}

BenchStore::~BenchStore() = default;

json BenchStore::options() const {
  const std::lock_guard lock(mutex_);
  Stmt s(*this, db_->handle, "SELECT value FROM meta WHERE key = 'options'");
  if (!s.step()) return nullptr;
  return json::parse(s.text(0));
}

void BenchStore::set_options(const json& options) {
  const std::lock_guard lock(mutex_);
  Stmt s(*this, db_->handle, "INSERT OR REPLACE INTO meta (key, value) VALUES ('options', ?)");
  s.bind(1, options.dump()).step();
}

void BenchStore::add_samples(const std::vector<SampleRow>& rows) {
  const std::lock_guard lock(mutex_);
  db_->exec("BEGIN IMMEDIATE");
  try {
    Stmt s(*this, db_->handle,
           "INSERT OR IGNORE INTO samples (problem_id, problem_name, level, sample, seed, status) "
           "VALUES (?, ?, ?, ?, ?, 'pending')");
    for (const auto& r : rows) {
      s.reset();
      s.bind(1, r.problem_id)
          .bind(2, r.problem_name)
          .bind(3, r.level)
          .bind(4, std::int64_t{r.sample})
          .bind(5, static_cast<std::int64_t>(r.seed))
          .step();
    }
    db_->exec("COMMIT");
  } catch (...) {
    db_->exec("ROLLBACK");
    throw;
  }
}

std::vector<SampleRow> BenchStore::samples() const {
  const std::lock_guard lock(mutex_);
  Stmt s(*this, db_->handle,
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
  Stmt s(*this, db_->handle,
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
  Stmt s(*this, db_->handle, "UPDATE samples SET eval_run = ? WHERE id = ?");
  s.bind(1, eval_run).bind(2, sample_id).step();
}

void BenchStore::set_record(std::int64_t sample_id, const json& record) {
  const std::lock_guard lock(mutex_);
  Stmt s(*this, db_->handle,
         "UPDATE samples SET record = ?, verdict = ?, speedup = ? WHERE id = ?");
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
  Stmt s(*this, db_->handle,
         "INSERT INTO stages (name, seconds) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET "
         "seconds = seconds + excluded.seconds");
  s.bind(1, stage).bind(2, seconds).step();
}

std::map<std::string, double> BenchStore::stage_seconds() const {
  const std::lock_guard lock(mutex_);
  Stmt s(*this, db_->handle, "SELECT name, seconds FROM stages");
  std::map<std::string, double> out;
  while (s.step()) out[s.text(0)] = s.real(1);
  return out;
}

}  // namespace dice::generation
