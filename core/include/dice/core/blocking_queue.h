#pragma once
// A closeable multi-producer multi-consumer queue for pipelines of threads.

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

namespace dice {

/// FIFO queue shared by threads. pop() blocks until an item arrives or the queue is closed and
/// drained (then it returns nothing). push() after close() is ignored and returns false.
template <typename T>
class BlockingQueue {
 public:
  bool push(T item) {
    {
      const std::lock_guard lock(mutex_);
      if (closed_) return false;
      items_.push_back(std::move(item));
    }
    ready_.notify_one();
    return true;
  }

  std::optional<T> pop() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

  void close() {
    {
      const std::lock_guard lock(mutex_);
      closed_ = true;
    }
    ready_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace dice
