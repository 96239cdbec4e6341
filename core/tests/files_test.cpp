#include "dice/core/files.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "dice/core/error.h"
#include "dice/core/hash.h"

namespace dice {
namespace {

namespace fs = std::filesystem;

TEST(Files, WriteAtomicThenRead) {
  const fs::path dir =
      fs::temp_directory_path() / ("dice_files_test_" + std::to_string(::getpid()));
  const fs::path file = dir / "a" / "b.txt";
  write_file_atomic(file, "hello\nworld\n");
  EXPECT_EQ(read_file(file), "hello\nworld\n");
  EXPECT_EQ(read_file_tail(file, 6), "world\n");
  fs::remove_all(dir);
}

TEST(Files, AppendLineTailKeepsTheLastLinesInBoundedMemory) {
  std::string output;
  for (int i = 0; i < 1000; ++i) {
    append_line_tail(output, "line " + std::to_string(i), 100);
    ASSERT_LE(output.size(), 200u + 9u);  // at most twice the limit plus one line
  }
  const std::string tail = tail_text(output, 100);
  EXPECT_LE(tail.size(), 100u);
  EXPECT_EQ(tail.substr(tail.size() - 9), "line 999\n");
  EXPECT_EQ(tail.rfind("line ", 0), 0u);  // cut at a line start
}

TEST(Files, MissingFileNamesThePath) {
  try {
    read_file("/nonexistent/dice/file.py");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dice/file.py"), std::string::npos);
  }
}

TEST(Files, TailTextCutsAtLine) {
  EXPECT_EQ(tail_text("short", 100), "short");
  EXPECT_EQ(tail_text("line one\nline two\n", 12), "line two\n");
}

TEST(Hash, Sha256KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace dice
