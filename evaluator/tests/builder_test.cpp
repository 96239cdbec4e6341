#include "dice/evaluator/builder.h"

#include <gtest/gtest.h>

#include "dice/core/error.h"
#include "dice/core/process.h"
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

/// Builds real extensions against the installed torch: slow (a precompiled header, two compiles
/// of main.cpp, two of cuda.cu), so one test. Objects are cached by their own inputs: a candidate
/// with the same C++ half and another CUDA half reuses main.o.
TEST(Builder, BuildsCachesObjectsAndReportsCompileErrors) {
  const Toolchain toolchain = query_toolchain(testing::test_python(), std::chrono::seconds(300));
  if (toolchain.nvcc_version.empty()) GTEST_SKIP() << "nvcc not found: CUDA builds not tested";
  ScratchDir cache("dice_build_cache");
  ExtensionBuilder builder(toolchain, {.cache_dir = cache.path(), .arch = "sm_90", .jobs = 2});

  const ExtensionSpec good = add_one_spec(kGoodCuda);
  const BuildResult first = builder.build(good);
  ASSERT_TRUE(first.ok) << first.log_tail;
  EXPECT_FALSE(first.cached);
  EXPECT_EQ(first.main.status, "built");
  EXPECT_TRUE(first.main.pch) << first.log_tail;  // the precompiled header was built and used
  EXPECT_EQ(first.main.compiler, builder.main_compiler().version) << first.log_tail;
  EXPECT_EQ(first.cuda.status, "built");
  EXPECT_TRUE(std::filesystem::exists(first.module_path));
  EXPECT_EQ(first.module_path.filename().string(),
            "add_one_" + first.main_key.substr(0, 12) + ".so");
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
  EXPECT_EQ(broken.main.status, "cached");  // same C++ half: main.o was not compiled again
  EXPECT_EQ(broken.main_key, first.main_key);
  EXPECT_EQ(broken.cuda.status, "failed");
  EXPECT_NE(broken.log_tail.find("error"), std::string::npos) << broken.log_tail;
  const BuildResult broken_again = builder.build(bad);
  EXPECT_FALSE(broken_again.ok);
  EXPECT_TRUE(broken_again.cached);  // same sources, same failure: not rebuilt

  // A C++-only extension from the same cache: the precompiled header is shared (WITH_CUDA and
  // the module name are not part of it), the module loads in Python and its functions work,
  // errors included: the main.cpp compiler (clang++ when present) is ABI-compatible with torch.
  ExtensionSpec cpp;
  cpp.digest = "c";
  cpp.name = "scale";
  cpp.with_cuda = false;
  cpp.cpp_sources = R"(
torch::Tensor scale(torch::Tensor x, double s) {
  TORCH_CHECK(x.dim() == 1, "scale: need a 1-d tensor, got ", x.dim(), " dims");
  return x * s;
}
std::vector<torch::Tensor> split_sum(torch::Tensor x) { return {x, x.sum()}; })";
  cpp.functions = nlohmann::json::array({"scale", "split_sum"});
  const BuildResult cpu_only = builder.build(cpp);
  ASSERT_TRUE(cpu_only.ok) << cpu_only.log_tail;
  EXPECT_TRUE(cpu_only.main.pch);
  EXPECT_EQ(cpu_only.cuda.status, "none");
  const auto py = testing::test_python();
  const std::string script =
      "import sys, torch\n"
      "from pathlib import Path\n"
      "from dice_worker.loader import load_extension\n"
      "m = load_extension(Path(sys.argv[1]))\n"
      "print('scaled', m.scale(torch.arange(3.0), 2.0).tolist())\n"
      "print('pair', [t.tolist() for t in m.split_sum(torch.ones(2))])\n"
      "try:\n"
      "    m.scale(torch.ones(2, 2), 1.0)\n"
      "except RuntimeError as e:\n"
      "    print('raised', str(e).splitlines()[0])\n";
  ProcessOptions run{.argv = {py.python, "-c", script, cpu_only.module_path.string()}};
  run.env["PYTHONPATH"] = py.worker_path.string();
  const auto r = run_command(run, std::chrono::seconds(120));
  EXPECT_TRUE(r.status.ok()) << r.output;
  EXPECT_NE(r.output.find("scaled [0.0, 2.0, 4.0]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("pair [[1.0, 1.0], 2.0]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("raised scale: need a 1-d tensor, got 2 dims"), std::string::npos)
      << r.output;
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
