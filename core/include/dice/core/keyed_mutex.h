#pragma once
// Per-key mutual exclusion inside one process: the build caches let one thread build a key while
// the others that need the same key wait, then read the cache. Across processes the caches rely
// on atomic renames instead.

#include <condition_variable>
#include <mutex>
#include <set>
#include <string>

namespace dice {

/// A set of named locks. lock(key) blocks while another thread holds `key`.
class KeyedMutex {
 public:
  /// Holds one key until destroyed.
  class Lock {
   public:
    Lock(KeyedMutex& owner, std::string key) : owner_(owner), key_(std::move(key)) {}
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;
    ~Lock() {
      {
        const std::lock_guard guard(owner_.mutex_);
        owner_.held_.erase(key_);
      }
      owner_.released_.notify_all();
    }

   private:
    KeyedMutex& owner_;
    std::string key_;
  };

  /// Waits until no other thread holds `key`, then holds it.
  [[nodiscard]] Lock lock(const std::string& key) {
    std::unique_lock guard(mutex_);
    released_.wait(guard, [&] { return !held_.contains(key); });
    held_.insert(key);
    return Lock(*this, key);
  }

 private:
  std::mutex mutex_;
  std::condition_variable released_;
  std::set<std::string> held_;
};

}  // namespace dice
