#include "dice/core/sqlite.h"

#include <sqlite3.h>

#include <system_error>
#include <utility>

#include "dice/core/error.h"

namespace dice {

namespace fs = std::filesystem;

SqliteDb::SqliteDb(const fs::path& path, std::string label)
    : where_(std::move(label) + " " + path.string()) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  if (ec) throw Error("cannot create folder " + path.parent_path().string() + ": " + ec.message());
  const int rc =
      sqlite3_open_v2(path.c_str(), &handle_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string why = handle_ != nullptr ? sqlite3_errmsg(handle_) : sqlite3_errstr(rc);
    sqlite3_close(handle_);
    throw Error("cannot open " + where_ + ": " + why);
  }
  sqlite3_busy_timeout(handle_, 30000);
  try {
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=FULL");
  } catch (...) {
    sqlite3_close(handle_);
    throw;
  }
}

SqliteDb::~SqliteDb() {
  sqlite3_close(handle_);
}

void SqliteDb::fail(const std::string& what) const {
  throw Error(where_ + ": " + what + ": " + sqlite3_errmsg(handle_));
}

void SqliteDb::exec(const char* sql) const {
  char* message = nullptr;
  if (sqlite3_exec(handle_, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    const std::string why = message != nullptr ? message : "unknown error";
    sqlite3_free(message);
    throw Error(where_ + ": " + sql + ": " + why);
  }
}

std::int64_t SqliteDb::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(handle_);
}

SqliteStatement::SqliteStatement(const SqliteDb& db, const char* sql) : db_(db) {
  if (sqlite3_prepare_v2(db.handle(), sql, -1, &stmt_, nullptr) != SQLITE_OK)
    db.fail(std::string("preparing ") + sql);
}

SqliteStatement::~SqliteStatement() {
  sqlite3_finalize(stmt_);
}

void SqliteStatement::check(int rc, const char* what) const {
  if (rc != SQLITE_OK) db_.fail(std::string(what) + " in " + sqlite3_sql(stmt_));
}

SqliteStatement& SqliteStatement::bind(int i, const std::string& v) {
  check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT),
        "binding a text");
  return *this;
}

SqliteStatement& SqliteStatement::bind(int i, std::int64_t v) {
  check(sqlite3_bind_int64(stmt_, i, v), "binding an integer");
  return *this;
}

SqliteStatement& SqliteStatement::bind(int i, double v) {
  check(sqlite3_bind_double(stmt_, i, v), "binding a real");
  return *this;
}

SqliteStatement& SqliteStatement::bind_null(int i) {
  check(sqlite3_bind_null(stmt_, i), "binding NULL");
  return *this;
}

void SqliteStatement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool SqliteStatement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_.fail(std::string("executing ") + sqlite3_sql(stmt_));
}

std::string SqliteStatement::text(int column) const {
  const auto* p = sqlite3_column_text(stmt_, column);
  return p != nullptr ? std::string(reinterpret_cast<const char*>(p),
                                    static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)))
                      : std::string();
}

std::int64_t SqliteStatement::integer(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

double SqliteStatement::real(int column) const {
  return sqlite3_column_double(stmt_, column);
}

bool SqliteStatement::null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int SqliteStatement::changes() const {
  return sqlite3_changes(db_.handle());
}

SqliteTransaction::SqliteTransaction(const SqliteDb& db) : db_(db) {
  db_.exec("BEGIN IMMEDIATE");
}

SqliteTransaction::~SqliteTransaction() {
  if (!done_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void SqliteTransaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace dice
