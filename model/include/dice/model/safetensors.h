#pragma once
// The safetensors format (huggingface/safetensors): an 8-byte little-endian header length N, N
// bytes of JSON {"__metadata__": {str: str}, NAME: {"dtype", "shape", "data_offsets": [b, e]}},
// then the data section; offsets are relative to the data section, tensors row-major.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dice/model/dtype.h"
#include "dice/model/mapped_file.h"

namespace dice::model {

/// A tensor shape as messages and reports print it: "[2, 3]" ("[]" for a scalar).
std::string shape_text(std::span<const std::int64_t> shape);

/// Largest header accepted (the safetensors library's own limit is 100 MB).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

/// One tensor of a checkpoint: a view into the memory-mapped file (valid while its Checkpoint
/// lives). Row-major, little-endian, `data.size() == product(shape) * dtype_size(dtype)`.
/// safetensors does not align tensors: `data` may be unaligned for its dtype, so read it with
/// to_f32 or memcpy, never through a reinterpret_cast pointer.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> data;
  std::filesystem::path file;  ///< the .safetensors file it lives in (for error messages)

  /// product(shape) (1 for a scalar).
  std::int64_t numel() const;
  /// The values as fp32 (bf16/fp16 widened exactly), in row-major order.
  std::vector<float> to_f32() const;
  /// Writes the values as fp32 into `out` (out.size() == numel()). Throws dice::Error otherwise.
  void to_f32(std::span<float> out) const;
};

/// One entry of a safetensors header, validated (see SafetensorsFile::open).
struct TensorEntry {
  std::string name;
  std::string dtype_name;      ///< as in the file: "BF16", "F32", "I64", ...
  std::optional<DType> dtype;  ///< set for F32, F16 and BF16, the dtypes dice computes with
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  ///< data_offsets[0], bytes from the start of the data section
  std::uint64_t end = 0;    ///< data_offsets[1]
};

/// A memory-mapped, validated .safetensors file. Move-only.
class SafetensorsFile {
 public:
  /// Maps and validates `path`: header length within the file (and at most
  /// kMaxSafetensorsHeaderBytes), header a well-formed JSON object, `__metadata__` an object of
  /// strings, every dtype one safetensors defines, shape non-negative integers, data_offsets
  /// ordered and inside the file, end - begin == numel x dtype size, no two tensors overlapping.
  /// Throws dice::InputError naming the file, the tensor and what is wrong.
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return map_.path(); }
  std::uint64_t file_size() const { return map_.size(); }
  /// Byte offset of the data section in the file (8 + header length).
  std::uint64_t data_offset() const { return data_offset_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// Every tensor, in the order of their data in the file.
  const std::vector<TensorEntry>& entries() const { return entries_; }
  /// The entry called `name`, or nullptr.
  const TensorEntry* find(const std::string& name) const;
  /// The raw bytes of `entry` (an entry of this file).
  std::span<const std::byte> bytes(const TensorEntry& entry) const;
  /// A view of `entry`. Throws dice::InputError naming the file and the tensor if its dtype is
  /// not F32, F16 or BF16.
  TensorView view(const TensorEntry& entry) const;

 private:
  SafetensorsFile() = default;
  MappedFile map_;
  std::uint64_t data_offset_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<TensorEntry> entries_;
  std::map<std::string, std::size_t> index_;
};

/// Name, dtype and shape of a tensor to write.
struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  /// product(shape) x dtype_size(dtype).
  std::uint64_t nbytes() const;
};

/// Writes one .safetensors file as a stream: the header first (from the specs), then each
/// tensor's bytes in spec order, in pieces of any size. The file appears under its name only
/// when finish() succeeds (written to `path` + ".tmp", then renamed); the destructor removes an
/// unfinished temporary file. The header is padded with spaces so the data section starts at a
/// multiple of 8, as the safetensors library does.
class SafetensorsWriter {
 public:
  /// Opens the file and writes its header. `metadata` goes to "__metadata__" (the safetensors
  /// and transformers convention is {"format": "pt"}). Throws dice::Error naming `path` if it
  /// cannot be written or on duplicate names or negative dimensions.
  SafetensorsWriter(std::filesystem::path path, std::vector<TensorSpec> tensors,
                    const std::map<std::string, std::string>& metadata = {{"format", "pt"}});
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  ~SafetensorsWriter();

  /// Appends the next `bytes` of the data section (tensors in spec order, row-major,
  /// little-endian). Throws dice::Error naming the file if that is more than the specs hold or
  /// the write fails.
  void append(std::span<const std::byte> bytes);
  /// Checks that every byte was written, flushes, closes and renames into place. Throws
  /// dice::Error naming the file and the first tensor left short otherwise.
  void finish();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::filesystem::path tmp_path_;
  std::vector<TensorSpec> tensors_;
  std::ofstream out_;
  std::uint64_t data_bytes_ = 0;
  std::uint64_t written_ = 0;
  bool finished_ = false;
};

/// Writes a whole .safetensors file from tensors in memory (each span holds the spec's bytes).
/// Throws as SafetensorsWriter does, and dice::Error if a span has the wrong size.
void write_safetensors(
    const std::filesystem::path& path,
    const std::vector<std::pair<TensorSpec, std::span<const std::byte>>>& tensors,
    const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace dice::model
