#pragma once
// Fork-join over an index range (private to the engine's CPU code).

#include <algorithm>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace dice::engine::detail {

/// Calls fn(begin, end) on `threads` contiguous chunks of [0, count), one per thread (the calling
/// thread takes the first); returns when all are done and rethrows the first exception.
template <typename Fn>
void parallel_for(std::size_t count, int threads, Fn&& fn) {
  const std::size_t chunks =
      std::min<std::size_t>(count, static_cast<std::size_t>(std::max(threads, 1)));
  if (chunks <= 1) {
    if (count > 0) fn(std::size_t{0}, count);
    return;
  }
  std::vector<std::exception_ptr> errors(chunks);
  const auto run = [&](std::size_t c) {
    try {
      fn(count * c / chunks, count * (c + 1) / chunks);
    } catch (...) {
      errors[c] = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> workers;
    workers.reserve(chunks - 1);
    for (std::size_t c = 1; c < chunks; ++c) workers.emplace_back(run, c);
    run(0);
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace dice::engine::detail
