// dice_torch_cuda.h: the part of torch that the CUDA half of a candidate uses, for dice's builder.
//
// Every KernelBench/DICE candidate's CUDA source includes <torch/extension.h> (torch's whole C++
// API, pybind11 and Python), and nvcc parses it three times (cudafe++, cicc, the host compiler):
// most of a candidate's compile time. The builder first compiles the CUDA half with this header in
// place of torch's umbrella headers (evaluator/README.md, "CUDA headers"); a source that needs more
// fails to compile and is compiled again exactly as torch would, so no candidate is rejected
// because of this header.
//
// Rules that keep the two compiles equivalent (checked by evaluator/tests/builder_test.cpp):
// - only headers that <torch/extension.h> itself includes, so the slim compile sees a subset of
//   the declarations of the full one;
// - in namespace torch only names that are declared there (or reached through its
//   `using namespace at`) with the same meaning. torch::empty & co. name at::empty & co.: torch's
//   own versions (torch/csrc/autograd/generated/variable_factories.h) differ only for tensors
//   that require grad, and the builder never substitutes a source that mentions requires_grad.
// Changing this file changes the cache key of every object compiled with it. The C++ half
// (main.cpp) uses it too, with DICE_TORCH_HOST_ONLY and pybind11 (builder.h, slim_main_header).
#ifndef DICE_TORCH_CUDA_H  // a macro guard: the builder's precompiled copy and a source's
#define DICE_TORCH_CUDA_H  // own include of it are different files

#include <ATen/Dispatch.h>     // AT_DISPATCH_*
#include <ATen/core/Tensor.h>  // at::Tensor and its methods
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/full.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/Exception.h>  // TORCH_CHECK
// The C++ half (main.cpp) includes this header without CUDA's (builder.h, slim_main_header).
#ifndef DICE_TORCH_HOST_ONLY
#include <cuda.h>
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace torch {
using at::Tensor;
using at::TensorOptions;
using Dtype = at::ScalarType;
using at::Device;
using at::IntArrayRef;
using at::Layout;
using at::MemoryFormat;
using at::Scalar;
using at::ScalarType;

using at::empty;
using at::empty_like;
using at::empty_strided;
using at::full;
using at::full_like;
using at::ones;
using at::ones_like;
using at::zeros;
using at::zeros_like;

using at::device;
using at::dtype;
using at::kBFloat16;
using at::kBool;
using at::kByte;
using at::kChar;
using at::kCPU;
using at::kCUDA;
using at::kDouble;
using at::kFloat;
using at::kHalf;
using at::kInt;
using at::kLong;
using at::kShort;
using at::kStrided;
constexpr auto kUInt8 = at::kByte;
constexpr auto kInt8 = at::kChar;
constexpr auto kInt16 = at::kShort;
constexpr auto kInt32 = at::kInt;
constexpr auto kInt64 = at::kLong;
constexpr auto kFloat16 = at::kHalf;
constexpr auto kFloat32 = at::kFloat;
constexpr auto kFloat64 = at::kDouble;
}  // namespace torch

#endif  // DICE_TORCH_CUDA_H
