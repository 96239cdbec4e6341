#include "dice/core/sqlite.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "dice/core/error.h"

namespace dice {
namespace {

namespace fs = std::filesystem;

class Sqlite : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dice_sqlite_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

/// The message of the dice::Error that `f` throws ("" if none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(Sqlite, StoresRowsAndReadsThemBack) {
  const fs::path path = dir_ / "sub" / "t.db";  // the folder is created
  {
    SqliteDb db(path, "test database");
    db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, x REAL, n INTEGER)");
    SqliteStatement insert(db, "INSERT INTO t (name, x, n) VALUES (?, ?, ?)");
    insert.bind(1, std::string("a")).bind(2, 1.5).bind(3, 7).step();
    EXPECT_EQ(db.last_insert_rowid(), 1);
    insert.reset();
    insert.bind(1, std::string("b")).bind_null(2).bind(3, std::int64_t{1} << 40).step();
    EXPECT_EQ(insert.changes(), 1);
  }
  SqliteDb db(path, "test database");  // what was stepped is on disk
  SqliteStatement q(db, "SELECT name, x, n FROM t ORDER BY id");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.text(0), "a");
  EXPECT_DOUBLE_EQ(q.real(1), 1.5);
  EXPECT_EQ(q.integer(2), 7);
  ASSERT_TRUE(q.step());
  EXPECT_TRUE(q.null(1));
  EXPECT_EQ(q.integer(2), std::int64_t{1} << 40);
  EXPECT_FALSE(q.step());
}

TEST_F(Sqlite, TransactionRollsBackUnlessCommitted) {
  SqliteDb db(dir_ / "t.db", "test database");
  db.exec("CREATE TABLE t (v INTEGER)");
  {
    SqliteTransaction tx(db);
    db.exec("INSERT INTO t VALUES (1)");
  }  // destroyed before commit: rolled back
  {
    SqliteTransaction tx(db);
    db.exec("INSERT INTO t VALUES (2)");
    tx.commit();
  }
  SqliteStatement q(db, "SELECT v FROM t");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.integer(0), 2);
  EXPECT_FALSE(q.step());
}

TEST_F(Sqlite, ErrorsNameTheDatabaseAndTheStatement) {
  const fs::path path = dir_ / "t.db";
  SqliteDb db(path, "test database");
  db.exec("CREATE TABLE t (v INTEGER NOT NULL)");
  const std::string where = "test database " + path.string();
  const std::string bad_sql = error_of([&] { db.exec("SELEC nothing"); });
  EXPECT_NE(bad_sql.find(where), std::string::npos) << bad_sql;
  EXPECT_NE(bad_sql.find("SELEC nothing"), std::string::npos) << bad_sql;
  const std::string bad_prepare = error_of([&] { SqliteStatement s(db, "SELECT * FROM nowhere"); });
  EXPECT_NE(bad_prepare.find(where), std::string::npos) << bad_prepare;
  EXPECT_NE(bad_prepare.find("no such table"), std::string::npos) << bad_prepare;
  SqliteStatement insert(db, "INSERT INTO t (v) VALUES (?)");
  insert.bind_null(1);
  const std::string constraint = error_of([&] { insert.step(); });
  EXPECT_NE(constraint.find("NOT NULL"), std::string::npos) << constraint;
  EXPECT_NE(constraint.find("INSERT INTO t"), std::string::npos) << constraint;
  const std::string bad_bind = error_of([&] {
    insert.reset();
    insert.bind(5, 1);
  });
  EXPECT_NE(bad_bind.find("binding"), std::string::npos) << bad_bind;
}

TEST_F(Sqlite, CannotOpenAFolder) {
  fs::create_directories(dir_ / "folder.db");
  const std::string why = error_of([&] { SqliteDb db(dir_ / "folder.db", "test database"); });
  EXPECT_NE(why.find("cannot open test database " + (dir_ / "folder.db").string()),
            std::string::npos)
      << why;
}

}  // namespace
}  // namespace dice
