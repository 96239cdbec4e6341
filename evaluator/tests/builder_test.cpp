#include "dice/evaluator/builder.h"

#include <gtest/gtest.h>

#include "dice/core/error.h"
#include "test_support.h"

namespace dice::eval {
namespace {

using testing::ScratchDir;

TEST(Builder, GencodeFlag) {
  EXPECT_EQ(ExtensionBuilder::gencode_flag("sm_90"), "-gencode=arch=compute_90,code=sm_90");
  EXPECT_EQ(ExtensionBuilder::gencode_flag("sm_90a"), "-gencode=arch=compute_90a,code=sm_90a");
  EXPECT_THROW(ExtensionBuilder::gencode_flag("hopper"), InputError);
}

ExtensionSpec add_one_spec(const std::string& cuda_body) {
  ExtensionSpec s;
  s.digest = "d";
  s.name = "add_one";
  s.cpp_sources = "torch::Tensor add_one(torch::Tensor x);";
  s.cuda_sources = cuda_body;
  s.functions = nlohmann::json::array({"add_one"});
  return s;
}

const char* kGoodCuda = R"(
__global__ void add_one_kernel(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}
torch::Tensor add_one(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  add_one_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
)";

/// Builds real extensions against the installed torch: slow (two compiles), so one test.
TEST(Builder, BuildsCachesAndReportsCompileErrors) {
  const Toolchain toolchain = query_toolchain(testing::test_python(), std::chrono::seconds(300));
  if (toolchain.nvcc_version.empty()) GTEST_SKIP() << "nvcc not found: CUDA builds not tested";
  ScratchDir cache("dice_build_cache");
  ExtensionBuilder builder(toolchain, {.cache_dir = cache.path(), .arch = "sm_90", .jobs = 2});

  const ExtensionSpec good = add_one_spec(kGoodCuda);
  const BuildResult first = builder.build(good);
  ASSERT_TRUE(first.ok) << first.log_tail;
  EXPECT_FALSE(first.cached);
  EXPECT_TRUE(std::filesystem::exists(first.module_path));
  EXPECT_EQ(first.module_path.filename().string(), "add_one_" + first.key.substr(0, 12) + ".so");
  const BuildResult second = builder.build(good);
  EXPECT_TRUE(second.ok);
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.module_path, first.module_path);

  ExtensionBuilder other_arch(toolchain, {.cache_dir = cache.path(), .arch = "sm_80", .jobs = 1});
  EXPECT_NE(other_arch.key(good), builder.key(good));

  const ExtensionSpec bad = add_one_spec("__global__ void k( { this is not CUDA }");
  const BuildResult broken = builder.build(bad);
  EXPECT_FALSE(broken.ok);
  EXPECT_FALSE(broken.timed_out);
  EXPECT_NE(broken.log_tail.find("error"), std::string::npos) << broken.log_tail;
  const BuildResult broken_again = builder.build(bad);
  EXPECT_FALSE(broken_again.ok);
  EXPECT_TRUE(broken_again.cached);  // same sources, same failure: not rebuilt
}

TEST(Builder, SpecFromCaptureRecord) {
  const auto spec = ExtensionSpec::from_json({{"digest", "abc"},
                                              {"name", "n"},
                                              {"cpp_sources", "c"},
                                              {"cuda_sources", "u"},
                                              {"functions", {"f"}},
                                              {"extra_cflags", {"-O3"}},
                                              {"extra_ldflags", nullptr}});
  EXPECT_EQ(spec.digest, "abc");
  EXPECT_EQ(spec.extra_cflags, std::vector<std::string>{"-O3"});
  EXPECT_TRUE(spec.extra_ldflags.empty());
  EXPECT_TRUE(spec.with_cuda);
  EXPECT_THROW(ExtensionSpec::from_json({{"name", "n"}}), Error);
}

}  // namespace
}  // namespace dice::eval
