#include "dice/generation/prompts.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "dice/core/error.h"

namespace dice::generation {
namespace {

namespace fs = std::filesystem;

TEST(Prompts, OneShotHoldsTheProblemAndTheExample) {
  const std::string p = render_oneshot_prompt(default_prompt_dir() / "kernelbench_oneshot.txt",
                                              "class Model: pass  # {prefix}");
  EXPECT_NE(p.find("class Model: pass  # {prefix}"), std::string::npos);
  EXPECT_EQ(p.find("{problem}"), std::string::npos);
  EXPECT_NE(p.find("load_inline"), std::string::npos);
  EXPECT_NE(p.find("ModelNew"), std::string::npos);
}

TEST(Prompts, InfillHoldsPrefixSuffixAndProblemOnce) {
  const std::string p = render_infill_prompt(default_prompt_dir() / "kernel_infilling.txt",
                                             "PROBLEM{suffix}", "PREFIX", "SUFFIX");
  EXPECT_NE(p.find("PROBLEM{suffix}"), std::string::npos);  // values are not rescanned
  EXPECT_NE(p.find("PREFIX"), std::string::npos);
  EXPECT_NE(p.find("SUFFIX"), std::string::npos);
  EXPECT_LT(p.find("PREFIX"), p.find("SUFFIX"));
}

TEST(Prompts, MissingPlaceholderOrFileNamesTheFile) {
  const fs::path file = fs::temp_directory_path() / ("dice_prompt_" + std::to_string(::getpid()));
  std::ofstream(file) << "no placeholder here";
  try {
    render_infill_prompt(file, "a", "b", "c");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("placeholder"), std::string::npos);
  }
  fs::remove(file);
  EXPECT_THROW(render_oneshot_prompt(file, "x"), InputError);
}

}  // namespace
}  // namespace dice::generation
