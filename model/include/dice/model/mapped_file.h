#pragma once
// A read-only memory map of a whole file (RAII over POSIX mmap).

#include <cstddef>
#include <filesystem>
#include <span>

namespace dice::model {

/// The bytes of one file, mapped read-only and private. Move-only; unmapped on destruction.
/// The address of the bytes does not change when the object is moved.
class MappedFile {
 public:
  MappedFile() = default;
  /// Maps `path` whole. Throws dice::InputError naming the file if it cannot be opened, is not a
  /// regular file or cannot be mapped. An empty file gives an empty span.
  explicit MappedFile(const std::filesystem::path& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::filesystem::path& path() const { return path_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  std::size_t size() const { return size_; }

 private:
  void reset() noexcept;
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace dice::model
