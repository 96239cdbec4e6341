#include "dice/generation/extract.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace dice::generation {
namespace {

namespace fs = std::filesystem;

eval::PythonEnv env() {
  const fs::path venv = fs::path(DICE_SOURCE_DIR) / ".venv" / "bin" / "python3";
  return {fs::exists(venv) ? venv.string() : "python3",
          fs::path(DICE_SOURCE_DIR) / "evaluator" / "worker"};
}

TEST(Extract, LastCompletePythonBlock) {
  CodeExtractor x(env());
  const Extracted e = x.extract("text\n```python\na = 1\n```\nmore\n```python\nb = 2\n```\n");
  EXPECT_EQ(e.code, "b = 2\n");
  EXPECT_FALSE(e.truncated);
  EXPECT_TRUE(e.from_block);
}

TEST(Extract, TruncatedOutputIsReportedAsSuch) {
  CodeExtractor x(env());
  const Extracted e = x.extract("```python\na = 1\n```\n```python\nb = 2 ... cut");
  EXPECT_TRUE(e.truncated);
  EXPECT_EQ(e.code, "a = 1\n");  // the last complete block
  const Extracted none = x.extract("```python\nonly open");
  EXPECT_TRUE(none.truncated);
  EXPECT_EQ(none.code, "");
}

TEST(Extract, TextWithoutFenceIsTakenWhole) {
  CodeExtractor x(env());
  const Extracted e = x.extract("source = \"\"\"\n__global__ void k() {}\n\"\"\"\n");
  EXPECT_FALSE(e.from_block);
  EXPECT_EQ(e.code, "source = \"\"\"\n__global__ void k() {}\n\"\"\"\n");
  EXPECT_EQ(x.extract("ünïcode ✓").code, "ünïcode ✓");
}

TEST(Extract, CodePythonCannotParseCarriesTheParsersMessage) {
  CodeExtractor x(env());
  const Extracted prose = x.extract("I would write a kernel here.");
  ASSERT_TRUE(prose.syntax_error);
  EXPECT_EQ(prose.syntax_error->rfind("SyntaxError: invalid syntax", 0), 0u) << *prose.syntax_error;
  EXPECT_NE(prose.syntax_error->find("(<unknown>, line 1)"), std::string::npos);
  EXPECT_FALSE(x.extract("```python\nclass ModelNew: pass\n```\n").syntax_error);
  EXPECT_FALSE(x.extract("```python\nonly open").syntax_error);  // blank code: no parse
}

TEST(Extract, InfillCandidateIsPrefixMiddleSuffix) {
  const Extracted middle{"MIDDLE\n", false, true, std::nullopt};
  EXPECT_EQ(infill_candidate("PRE\n", middle, "SUF"), "PRE\nMIDDLE\nSUF");
}

}  // namespace
}  // namespace dice::generation
