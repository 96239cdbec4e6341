// RAII memory map of a whole file (POSIX open/fstat/mmap).

#include "dice/model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "dice/core/error.h"

namespace dice::model {

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

// Closes a file descriptor when it goes out of scope.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path.string() + ": cannot open: " + errno_text());
  const FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw InputError(path.string() + ": cannot stat: " + errno_text());
  if (!S_ISREG(st.st_mode)) throw InputError(path.string() + ": not a regular file");
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ == 0) return;
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) {
    size_ = 0;
    throw InputError(path.string() + ": cannot map into memory: " + errno_text());
  }
  data_ = static_cast<const std::byte*>(p);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  reset();
}

void MappedFile::reset() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace dice::model
