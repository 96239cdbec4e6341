#include "dice/evaluator/builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>

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
  EXPECT_EQ(first.cuda.header, "slim") << first.log_tail;  // dice_torch_cuda.h was enough
  EXPECT_EQ(first.main.header, "slim") << first.log_tail;  // dice_torch_main.h was enough
  EXPECT_TRUE(std::filesystem::exists(first.module_path));
  EXPECT_EQ(first.module_path.filename().string(),
            "add_one_" + first.main_key.substr(0, 12) + ".so");
  const BuildResult second = builder.build(good);
  EXPECT_TRUE(second.ok);
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.module_path, first.module_path);
  EXPECT_EQ(second.cuda.header, "slim");  // remembered with the module
  EXPECT_EQ(second.main.header, "slim");

  ExtensionBuilder other_arch(toolchain, {.cache_dir = cache.path(), .arch = "sm_80", .jobs = 1});
  EXPECT_NE(other_arch.key(good), builder.key(good));

  const ExtensionSpec bad = add_one_spec("__global__ void k( { this is not CUDA }");
  const BuildResult broken = builder.build(bad);
  EXPECT_FALSE(broken.ok);
  EXPECT_FALSE(broken.timed_out);
  EXPECT_EQ(broken.main.status, "cached");  // same C++ half: main.o was not compiled again
  EXPECT_EQ(broken.main_key, first.main_key);
  EXPECT_EQ(broken.cuda.status, "failed");
  EXPECT_EQ(broken.cuda.header, "full");  // failed with the slim header, then with torch's
  EXPECT_NE(broken.log_tail.find("compiled again with torch's headers"), std::string::npos)
      << broken.log_tail;
  EXPECT_NE(broken.log_tail.find("error"), std::string::npos) << broken.log_tail;
  const BuildResult broken_again = builder.build(bad);
  EXPECT_FALSE(broken_again.ok);
  EXPECT_TRUE(broken_again.cached);  // same sources, same failure: not rebuilt

  // A C++-only extension from the same cache that needs torch's headers (the slim compile fails,
  // torch's decides, with its own precompiled header: WITH_CUDA and the module name are not part
  // of one); the module loads in Python and its functions work, errors included: the main.cpp
  // compiler (clang++ when present) is ABI-compatible with torch.
  ExtensionSpec cpp;
  cpp.digest = "c";
  cpp.name = "scale";
  cpp.with_cuda = false;
  cpp.cpp_sources = R"(
torch::Tensor scale(torch::Tensor x, double s) {
  TORCH_CHECK(x.dim() == 1, "scale: need a 1-d tensor, got ", x.dim(), " dims");
  return torch::relu(x) * s;  // torch::relu: not in dice_torch_main.h
}
std::vector<torch::Tensor> split_sum(torch::Tensor x) { return {x, x.sum()}; })";
  cpp.functions = nlohmann::json::array({"scale", "split_sum"});
  const BuildResult cpu_only = builder.build(cpp);
  ASSERT_TRUE(cpu_only.ok) << cpu_only.log_tail;
  EXPECT_TRUE(cpu_only.main.pch);
  EXPECT_EQ(cpu_only.main.header, "full");  // failed with the slim header, then built with torch's
  EXPECT_NE(cpu_only.log_tail.find("main.cpp failed with dice_torch_main.h"), std::string::npos)
      << cpu_only.log_tail;
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

TEST(Builder, SlimCudaSourceReplacesOnlyUmbrellaIncludes) {
  const ExtensionSpec spec = add_one_spec(
      "#include <torch/extension.h>\n"
      "  #  include \"torch/torch.h\"  // all of it\n"
      "#include <torch/all.h>\r\n"
      "#include <torch/types.h>\n"
      "#include <torch/nn.h>\n"
      "#include <ATen/cuda/CUDAContext.h>\n"
      "int x; // #include <torch/extension.h>\n"
      "__global__ void k() {}");
  const std::optional<std::string> slim = slim_cuda_source(spec);
  ASSERT_TRUE(slim);
  const std::string full = full_cuda_source(spec);
  EXPECT_EQ(
      full.rfind("#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n", 0),
      0u);
  // Line numbers are kept: the sources start on line 4 either way.
  EXPECT_EQ(std::count(slim->begin(), slim->end(), '\n'),
            std::count(full.begin(), full.end(), '\n'));
  EXPECT_EQ(slim->rfind("#include \"dice_torch_cuda.h\"\n", 0), 0u);
  EXPECT_EQ(slim->find("\n#include <torch/extension.h>"), std::string::npos) << *slim;
  EXPECT_EQ(slim->find("\n  #  include \"torch/torch.h\""), std::string::npos) << *slim;
  EXPECT_EQ(slim->find("\n#include <torch/all.h>"), std::string::npos) << *slim;
  EXPECT_EQ(slim->find("\n#include <torch/types.h>"), std::string::npos) << *slim;
  EXPECT_NE(slim->find("\n#include <torch/nn.h>\n"), std::string::npos) << *slim;
  EXPECT_NE(slim->find("\n#include <ATen/cuda/CUDAContext.h>\n"), std::string::npos) << *slim;
  EXPECT_NE(slim->find("\nint x; // #include <torch/extension.h>\n"), std::string::npos) << *slim;
  EXPECT_NE(slim->find("\n__global__ void k() {}\n"), std::string::npos) << *slim;

  const ExtensionSpec trailing =
      add_one_spec("#include <torch/extension.h>\n__global__ void k() {}\n");
  const std::string trailing_slim = slim_cuda_source(trailing).value();
  const std::string trailing_full = full_cuda_source(trailing);
  EXPECT_EQ(std::count(trailing_slim.begin(), trailing_slim.end(), '\n'),
            std::count(trailing_full.begin(), trailing_full.end(), '\n'));

  // torch::empty & co. are ATen's in the slim header: a source that asks for grad keeps torch's.
  EXPECT_FALSE(
      slim_cuda_source(add_one_spec("auto y = torch::zeros({2}, o.requires_grad(true));")));
}

TEST(Builder, SlimMainSourceKeepsBindingsAndLineNumbers) {
  ExtensionSpec spec = add_one_spec("");
  spec.cpp_sources =
      "#include <torch/extension.h>\n"
      "#include <vector>\n"
      "torch::Tensor add_one(torch::Tensor x);\n";
  spec.functions = {{"add_one", "adds \"one\""}};
  const std::optional<std::string> slim = slim_main_source(spec);
  ASSERT_TRUE(slim);
  const std::string full = full_main_source(spec);
  EXPECT_EQ(full.rfind("#include <torch/extension.h>\n#include <torch/extension.h>\n", 0), 0u)
      << full;
  EXPECT_EQ(slim->rfind("#include \"dice_torch_main.h\"\n// dice: in dice_torch_main.h: ", 0), 0u)
      << *slim;
  EXPECT_EQ(std::count(slim->begin(), slim->end(), '\n'),
            std::count(full.begin(), full.end(), '\n'));
  EXPECT_NE(slim->find("\n#include <vector>\n"), std::string::npos) << *slim;
  // The same pybind11 module either way, docstring escaped.
  const std::string module =
      "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
      "m.def(\"add_one\", torch::wrap_pybind_function(add_one), \"adds \\\"one\\\"\");\n}\n";
  EXPECT_NE(full.find(module), std::string::npos) << full;
  EXPECT_NE(slim->find(module), std::string::npos) << *slim;
  spec.cpp_sources += "auto z = torch::zeros({2}, torch::requires_grad());\n";
  EXPECT_FALSE(slim_main_source(spec));

  const std::string header = slim_main_header();
  EXPECT_NE(header.find("#define DICE_TORCH_HOST_ONLY"), std::string::npos);
  EXPECT_NE(header.find(slim_cuda_header()), std::string::npos);
  EXPECT_NE(header.find("#include <torch/csrc/utils/pybind.h>"), std::string::npos);
}

/// The slim headers may only include headers that <torch/extension.h> includes itself, so that a
/// half compiled with one sees a subset of torch's declarations (dice_torch_cuda.h).
TEST(Builder, SlimHeadersIncludeOnlyWhatTorchExtensionIncludes) {
  const Toolchain toolchain = query_toolchain(testing::test_python(), std::chrono::seconds(300));
  if (toolchain.nvcc_version.empty()) GTEST_SKIP() << "nvcc not found: no CUDA headers to check";
  ScratchDir dir("dice_slim_header");
  dir.write("dice_torch_cuda.h", std::string(slim_cuda_header()));
  dir.write("dice_torch_main.h", slim_main_header());
  dir.write("slim.cpp", "#include \"dice_torch_cuda.h\"\n");
  dir.write("slim_main.cpp", "#include \"dice_torch_main.h\"\n");
  dir.write("full.cpp",
            "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
            "#include <torch/extension.h>\n");
  const auto headers = [&](const std::string& file) {
    std::vector<std::string> argv{toolchain.cxx, "-std=c++17", "-M", file};
    argv.insert(argv.end(), toolchain.cflags.begin(), toolchain.cflags.end());
    for (const auto& p : toolchain.include_paths) argv.insert(argv.end(), {"-isystem", p});
    const auto r = run_command({.argv = argv, .cwd = dir.path()}, std::chrono::seconds(300),
                               std::size_t{1} << 24);
    EXPECT_TRUE(r.status.ok()) << r.output;
    std::set<std::string> out;
    std::istringstream words(r.output);
    for (std::string w; words >> w;)
      if (w != "\\" && w.back() != ':' && w.find(".cpp") == std::string::npos) out.insert(w);
    return out;
  };
  const std::set<std::string> full = headers("full.cpp");
  for (const std::string file : {"slim.cpp", "slim_main.cpp"}) {
    const std::set<std::string> slim = headers(file);
    EXPECT_GT(slim.size(), 100u) << file;
    EXPECT_GT(full.size(), slim.size()) << file;
    for (const auto& h : slim) {
      if (!h.starts_with("dice_torch_")) {
        EXPECT_TRUE(full.contains(h)) << file << ": " << h << " is not in torch's headers";
      }
    }
  }
  // The C++ half does without CUDA's headers.
  const std::set<std::string> main_headers = headers("slim_main.cpp");
  EXPECT_FALSE(std::any_of(main_headers.begin(), main_headers.end(),
                           [](const std::string& h) { return h.ends_with("/cuda_runtime.h"); }));
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
