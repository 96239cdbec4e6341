#include "sm_partition.h"

#include <string>
#include <utility>

#include "cuda_check.h"
#include "dice/core/error.h"

namespace dice::engine::cuda {
namespace {

/// The driver entry point `name` with the type of `Declared` (its declaration in the cuda.h we
/// build with, so asked for at that header's CUDA_VERSION). Throws dice::Error when the driver
/// lacks it.
template <typename Declared>
Declared* driver_function(const char* name) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  DICE_CUDA_CHECK(
      cudaGetDriverEntryPointByVersion(name, &function, CUDA_VERSION, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || function == nullptr)
    throw Error("SmPartition: the CUDA driver has no " + std::string(name) +
                " (green contexts need a CUDA 12.5+ driver; built for CUDA " +
                std::to_string(CUDA_VERSION) + ")");
  return reinterpret_cast<Declared*>(function);
}

void check_driver(CUresult status, const char* call) {
  if (status == CUDA_SUCCESS) return;
  throw Error("SmPartition: " + std::string(call) + " failed with CUDA driver error " +
              std::to_string(static_cast<int>(status)));
}

}  // namespace

SmPartition::SmPartition(int device, int first_sms) {
  DICE_CUDA_CHECK(cudaSetDevice(device));
  DICE_CUDA_CHECK(cudaFree(nullptr));  // the primary context, before green ones retain it
  const auto device_get = driver_function<decltype(cuDeviceGet)>("cuDeviceGet");
  const auto get_resource =
      driver_function<decltype(cuDeviceGetDevResource)>("cuDeviceGetDevResource");
  const auto split =
      driver_function<decltype(cuDevSmResourceSplitByCount)>("cuDevSmResourceSplitByCount");
  const auto describe =
      driver_function<decltype(cuDevResourceGenerateDesc)>("cuDevResourceGenerateDesc");
  const auto create = driver_function<decltype(cuGreenCtxCreate)>("cuGreenCtxCreate");
  const auto stream_create =
      driver_function<decltype(cuGreenCtxStreamCreate)>("cuGreenCtxStreamCreate");
  stream_destroy_ = driver_function<decltype(cuStreamDestroy)>("cuStreamDestroy");
  context_destroy_ = driver_function<decltype(cuGreenCtxDestroy)>("cuGreenCtxDestroy");
  CUdevice handle = 0;
  check_driver(device_get(&handle, device), "cuDeviceGet");
  CUdevResource all{};
  check_driver(get_resource(handle, &all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource");
  if (first_sms <= 0 || first_sms >= static_cast<int>(all.sm.smCount))
    throw Error("SmPartition: the first group's " + std::to_string(first_sms) +
                " SMs must be between 1 and the device's " + std::to_string(all.sm.smCount) +
                " - 1");
  CUdevResource group{}, rest{};
  unsigned int groups = 1;
  check_driver(split(&group, &groups, &all, &rest, 0, static_cast<unsigned int>(first_sms)),
               "cuDevSmResourceSplitByCount");
  if (groups != 1 || rest.sm.smCount == 0)
    throw Error("SmPartition: splitting " + std::to_string(all.sm.smCount) + " SMs at " +
                std::to_string(first_sms) + " left no second group");
  first_sms_ = static_cast<int>(group.sm.smCount);
  second_sms_ = static_cast<int>(rest.sm.smCount);
  try {
    CUdevResourceDesc first_desc = nullptr, second_desc = nullptr;
    check_driver(describe(&first_desc, &group, 1), "cuDevResourceGenerateDesc");
    check_driver(describe(&second_desc, &rest, 1), "cuDevResourceGenerateDesc");
    check_driver(create(&first_context_, first_desc, handle, CU_GREEN_CTX_DEFAULT_STREAM),
                 "cuGreenCtxCreate");
    check_driver(create(&second_context_, second_desc, handle, CU_GREEN_CTX_DEFAULT_STREAM),
                 "cuGreenCtxCreate");
    check_driver(stream_create(&first_stream_, first_context_, CU_STREAM_NON_BLOCKING, 0),
                 "cuGreenCtxStreamCreate");
    check_driver(stream_create(&second_stream_, second_context_, CU_STREAM_NON_BLOCKING, 0),
                 "cuGreenCtxStreamCreate");
  } catch (...) {
    release();
    throw;
  }
}

SmPartition::~SmPartition() {
  release();
}

void SmPartition::release() noexcept {
  // Streams and contexts exist only once the constructor found both destroy calls.
  for (CUstream* s : {&first_stream_, &second_stream_})
    if (*s != nullptr) stream_destroy_(std::exchange(*s, nullptr));
  for (CUgreenCtx* c : {&first_context_, &second_context_})
    if (*c != nullptr) context_destroy_(std::exchange(*c, nullptr));
}

}  // namespace dice::engine::cuda
