#pragma once
// An exclusive lock on a file (flock): one process at a time may own what the file guards. The
// kernel drops the lock when the process dies, however it dies.

#include <filesystem>
#include <string>

namespace dice {

/// Holds an exclusive flock on `path` (created if absent) until destroyed.
class FileLock {
 public:
  /// Takes the lock without waiting. Throws dice::InputError naming `path` and `what` if another
  /// process holds it, dice::Error if the file cannot be opened.
  FileLock(const std::filesystem::path& path, const std::string& what);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace dice
