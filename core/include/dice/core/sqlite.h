#pragma once
// A small RAII layer over SQLite for the stores of dice (the evaluator's results database, the
// bench store): a connection with the settings every store wants, prepared statements and
// transactions, whose errors name the database.

#include <cstdint>
#include <filesystem>
#include <string>

struct sqlite3;
struct sqlite3_stmt;

namespace dice {

/// An open SQLite database: serialized mode (one connection may be used from several threads),
/// a 30 s busy timeout, the WAL journal and synchronous=FULL (a committed row survives a machine
/// restart). Errors name it as "<label> <path>".
class SqliteDb {
 public:
  /// Opens or creates `path` (its folder is created). `label`: what the database is ("results
  /// database"). Throws dice::Error naming the database and SQLite's reason.
  SqliteDb(const std::filesystem::path& path, std::string label);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  /// Runs `sql` (one or more statements, no rows). Throws dice::Error naming the SQL.
  void exec(const char* sql) const;
  /// Throws dice::Error "<label> <path>: <what>: <SQLite's last error>".
  [[noreturn]] void fail(const std::string& what) const;
  /// The rowid of the last INSERT on this connection.
  std::int64_t last_insert_rowid() const;
  sqlite3* handle() const { return handle_; }

 private:
  sqlite3* handle_ = nullptr;
  std::string where_;
};

/// A prepared statement. Bind with bind(1, ...) (positions from 1); step() returns true while
/// rows come. Binding or stepping errors throw dice::Error naming the database and the SQL.
class SqliteStatement {
 public:
  /// Prepares `sql` (one statement) on `db`, which must outlive it. Throws dice::Error naming
  /// the database and the SQL.
  SqliteStatement(const SqliteDb& db, const char* sql);
  ~SqliteStatement();
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  SqliteStatement& bind(int i, const std::string& v);
  SqliteStatement& bind(int i, std::int64_t v);
  SqliteStatement& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  SqliteStatement& bind(int i, double v);
  SqliteStatement& bind_null(int i);
  /// Ready to run again with new bindings (the old ones cleared).
  void reset();
  bool step();
  /// Column values of the current row (text "" and numbers 0 for NULL).
  std::string text(int column) const;
  std::int64_t integer(int column) const;
  double real(int column) const;
  bool null(int column) const;
  /// Rows the last statement of the connection changed.
  int changes() const;

 private:
  void check(int rc, const char* what) const;
  const SqliteDb& db_;
  sqlite3_stmt* stmt_ = nullptr;
};

/// BEGIN IMMEDIATE ... COMMIT; rolls back if destroyed before commit() (a failed rollback is
/// ignored: SQLite rolls back an open transaction when the connection closes).
class SqliteTransaction {
 public:
  /// Begins the transaction on `db`, which must outlive it. Throws dice::Error (e.g. the
  /// database stayed locked past the busy timeout).
  explicit SqliteTransaction(const SqliteDb& db);
  ~SqliteTransaction();
  SqliteTransaction(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(const SqliteTransaction&) = delete;
  /// Commits. Throws dice::Error if SQLite cannot (the destructor then rolls back).
  void commit();

 private:
  const SqliteDb& db_;
  bool done_ = false;
};

}  // namespace dice
