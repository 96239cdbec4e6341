#include "boundary_probe.h"

#include <cuda/atomic>

#include <vector>

#include "cuda_check.h"
#include "dice/core/error.h"
#include "launch.cuh"

namespace dice::engine::cuda {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kPoolBytes = 512ll << 20;
constexpr int kInputs = 2048;     // floats of the previous output each block reads
constexpr int kMaxBlocks = 4096;  // per link: kMaxBlocks * kThreads floats per activation

__device__ std::uint64_t now_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Thread 0 waits until `counter` reaches `target` (acquire), then the block meets: the blocks
/// counted in wrote their outputs before they counted themselves in (a barrier, then a release
/// add by their thread 0; no __threadfence, which measured slower). Traps after 2 s.
__device__ void spin_until(int* counter, int target) {
  if (threadIdx.x == 0) {
    ::cuda::atomic_ref<int, ::cuda::thread_scope_device> ref(*counter);
    const std::uint64_t start = now_ns();
    while (ref.load(::cuda::memory_order_acquire) < target) {
      if (now_ns() - start > 2'000'000'000ull) __trap();
    }
  }
  __syncthreads();
}

__device__ unsigned read_weights(const uint4* w, std::int64_t vectors) {
  unsigned acc = 0;
  for (std::int64_t i = threadIdx.x; i < vectors; i += kThreads) {
    const uint4 v = __ldg(w + i);
    acc += v.x ^ v.y ^ v.z ^ v.w;
  }
  return acc;
}

/// One link of a probe chain, ordered after the link before it as `kMode` says (a plain launch
/// runs the kPdlAtExit code: its wait returns at once).
template <BoundaryMode kMode>
__global__ void __launch_bounds__(kThreads)
    link_kernel(const float* __restrict__ in, float* __restrict__ out, const uint4* weights,
                std::int64_t weight_vectors, bool early_weights, int* counters, int link, int links,
                int previous_blocks) {
  constexpr bool kFlags =
      kMode == BoundaryMode::kFlagsAfter || kMode == BoundaryMode::kFlagsAtStart;
  if constexpr (kMode == BoundaryMode::kFlagsAtStart) allow_next_grid();
  unsigned acc = 0;
  if (early_weights) acc = read_weights(weights, weight_vectors);
  if (kFlags && link > 0) {
    spin_until(&counters[link - 1], previous_blocks);
  } else {
    wait_for_prior_grid();
  }
  if constexpr (kFlags) {
    // The counter two links back is no longer read: every block of the link before this one
    // has passed its spin (it counted itself in). Links 0 and 1 reset the last two, whose
    // kernels finished in the previous run.
    if (blockIdx.x == 0 && threadIdx.x == 0)
      ::cuda::atomic_ref<int, ::cuda::thread_scope_device>(counters[(link + links - 2) % links])
          .store(0, ::cuda::memory_order_relaxed);
  }
  if constexpr (kMode == BoundaryMode::kPdlEarly || kMode == BoundaryMode::kFlagsAfter)
    allow_next_grid();
  if (!early_weights) acc = read_weights(weights, weight_vectors);
  float sum = 0;
  if (link > 0)
    for (int i = threadIdx.x; i < kInputs; i += kThreads) sum += in[i];
  out[static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x] =
      sum * (1.0f / kInputs) + static_cast<float>(acc & 0xff) * 1e-3f + 1.0f;
  if constexpr (kFlags) {
    __syncthreads();
    if (threadIdx.x == 0) {
      ::cuda::atomic_ref<int, ::cuda::thread_scope_device> ref(counters[link]);
      ref.fetch_add(1, ::cuda::memory_order_release);
    }
  }
}

using LinkKernel = void (*)(const float*, float*, const uint4*, std::int64_t, bool, int*, int, int,
                            int);

LinkKernel link_kernel_for(BoundaryMode mode) {
  switch (mode) {
    case BoundaryMode::kPdlEarly:
      return link_kernel<BoundaryMode::kPdlEarly>;
    case BoundaryMode::kFlagsAfter:
      return link_kernel<BoundaryMode::kFlagsAfter>;
    case BoundaryMode::kFlagsAtStart:
      return link_kernel<BoundaryMode::kFlagsAtStart>;
    case BoundaryMode::kPlain:
    case BoundaryMode::kPdlAtExit:
      break;
  }
  return link_kernel<BoundaryMode::kPdlAtExit>;
}

}  // namespace

BoundaryProbe::BoundaryProbe()
    : pool_(static_cast<std::size_t>(kPoolBytes)),
      activations_(2ull * kMaxBlocks * kThreads * sizeof(float)),
      counters_(kMaxLinks * sizeof(int)) {
  DICE_CUDA_CHECK(cudaMemset(pool_.get(), 0x5a, pool_.bytes()));
}

void BoundaryProbe::enqueue(const std::vector<BoundaryLink>& links, BoundaryMode mode,
                            bool early_weights, cudaStream_t stream) {
  if (links.size() < 3 || links.size() > kMaxLinks)
    throw Error("boundary probe: a chain has 3 to 512 links");
  const auto n = static_cast<int>(links.size());
  std::int64_t offset = 0;
  for (int i = 0; i < n; ++i) {
    const BoundaryLink& link = links[static_cast<std::size_t>(i)];
    if (link.blocks < 8 || link.blocks > kMaxBlocks || link.weight_bytes_per_block % 16 != 0)
      throw Error("boundary probe: a link has 8 to 4096 blocks and whole 16-byte weights");
    const std::int64_t bytes = link.blocks * link.weight_bytes_per_block;
    if (offset + bytes > kPoolBytes) offset = 0;
    const auto* weights =
        reinterpret_cast<const uint4*>(static_cast<const char*>(pool_.get()) + offset);
    offset += bytes;
    const bool pdl = mode != BoundaryMode::kPlain;
    launch_kernel("boundary probe link", link_kernel_for(mode), dim3(link.blocks), dim3(kThreads),
                  0, stream, pdl, activation((i + 1) % 2), activation(i % 2), weights,
                  link.weight_bytes_per_block / 16, early_weights && pdl, counters_.as<int>(), i, n,
                  links[static_cast<std::size_t>((i + n - 1) % n)].blocks);
  }
}

float* BoundaryProbe::activation(int parity) const {
  return activations_.as<float>() + static_cast<std::int64_t>(parity) * kMaxBlocks * kThreads;
}

double BoundaryProbe::checked_run(const std::vector<BoundaryLink>& links, BoundaryMode mode,
                                  bool early_weights, cudaStream_t stream) {
  // NaN activations: a link that read its input before the link before it wrote it would carry
  // a NaN (or the other buffer's older values) into the sum.
  DICE_CUDA_CHECK(cudaMemsetAsync(activations_.get(), 0xff, activations_.bytes(), stream));
  DICE_CUDA_CHECK(cudaMemsetAsync(counters_.get(), 0, counters_.bytes(), stream));
  enqueue(links, mode, early_weights, stream);
  DICE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> host(static_cast<std::size_t>(links.back().blocks) * kThreads);
  DICE_CUDA_CHECK(cudaMemcpy(host.data(), activation(static_cast<int>(links.size() - 1) % 2),
                             host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double sum = 0;
  for (const float v : host) sum += v;
  return sum;
}

}  // namespace dice::engine::cuda
