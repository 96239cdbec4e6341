// The safetensors format: a validating reader over a memory map, a streaming writer, and the
// fp32 widening of tensor views.

#include "dice/model/safetensors.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "dice/core/error.h"

namespace dice::model {

namespace fs = std::filesystem;
using nlohmann::json;

std::string shape_text(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {

// product(shape) with overflow detection; nullopt on overflow or a negative dimension.
std::optional<std::uint64_t> checked_numel(const std::vector<std::int64_t>& shape) {
  std::uint64_t n = 1;
  for (const std::int64_t d : shape) {
    if (d < 0) return std::nullopt;
    const auto u = static_cast<std::uint64_t>(d);
    if (u != 0 && n > std::numeric_limits<std::uint64_t>::max() / u) return std::nullopt;
    n *= u;
  }
  return n;
}

std::uint64_t read_le_u64(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint64_t>(p[i]);
  return v;
}

// A non-negative JSON integer, or nullopt.
std::optional<std::uint64_t> json_uint(const json& j) {
  if (j.is_number_unsigned()) return j.get<std::uint64_t>();
  if (j.is_number_integer() && j.get<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(j.get<std::int64_t>());
  return std::nullopt;
}

}  // namespace

std::int64_t TensorView::numel() const {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

void TensorView::to_f32(std::span<float> out) const {
  const auto n = static_cast<std::size_t>(numel());
  if (out.size() != n || data.size() != n * dtype_size(dtype))
    throw Error(file.string() + ": tensor '" + name + "': to_f32 with " +
                std::to_string(out.size()) + " outputs for " + std::to_string(n) + " elements in " +
                std::to_string(data.size()) + " bytes");
  const std::byte* p = data.data();
  switch (dtype) {
    case DType::kF32:
      if (n > 0) std::memcpy(out.data(), p, n * sizeof(float));
      break;
    case DType::kBF16:
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, p + 2 * i, 2);
        out[i] = bf16_to_f32(bits);
      }
      break;
    case DType::kF16:
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, p + 2 * i, 2);
        out[i] = f16_to_f32(bits);
      }
      break;
  }
}

std::vector<float> TensorView::to_f32() const {
  std::vector<float> out(static_cast<std::size_t>(numel()));
  to_f32(std::span<float>(out));
  return out;
}

SafetensorsFile SafetensorsFile::open(const fs::path& path) {
  SafetensorsFile file;
  file.map_ = MappedFile(path);
  const std::string where = path.string() + ": ";
  const std::span<const std::byte> bytes = file.map_.bytes();
  if (bytes.size() < 8)
    throw InputError(where + "truncated: " + std::to_string(bytes.size()) +
                     " bytes, shorter than the 8-byte header length of a safetensors file");
  const std::uint64_t header_len = read_le_u64(bytes.data());
  if (header_len > kMaxSafetensorsHeaderBytes)
    throw InputError(where + "header length " + std::to_string(header_len) +
                     " exceeds the limit of " + std::to_string(kMaxSafetensorsHeaderBytes) +
                     " bytes: not a safetensors file, or corrupt");
  if (header_len > bytes.size() - 8)
    throw InputError(where + "header length " + std::to_string(header_len) +
                     " goes beyond the end of the file (" + std::to_string(bytes.size()) +
                     " bytes): truncated or not a safetensors file");
  file.data_offset_ = 8 + header_len;
  const std::uint64_t data_size = bytes.size() - file.data_offset_;
  const auto* header_begin = reinterpret_cast<const char*>(bytes.data() + 8);
  json header;
  try {
    header = json::parse(header_begin, header_begin + header_len);
  } catch (const json::parse_error& e) {
    throw InputError(where + "header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) throw InputError(where + "header is JSON but not an object of tensors");

  for (const auto& [name, value] : header.items()) {
    const std::string at = where + "tensor '" + name + "': ";
    if (name == "__metadata__") {
      if (!value.is_object()) throw InputError(where + "__metadata__ is not an object of strings");
      for (const auto& [key, v] : value.items()) {
        if (!v.is_string())
          throw InputError(where + "__metadata__ entry '" + key + "' is not a string");
        file.metadata_[key] = v.get<std::string>();
      }
      continue;
    }
    if (!value.is_object()) throw InputError(at + "header entry is not an object");
    TensorEntry entry;
    entry.name = name;
    const auto dtype = value.find("dtype");
    if (dtype == value.end() || !dtype->is_string())
      throw InputError(at + "missing or non-string \"dtype\"");
    entry.dtype_name = dtype->get<std::string>();
    const std::optional<std::size_t> elem_size = safetensors_dtype_size(entry.dtype_name);
    if (!elem_size) throw InputError(at + "unknown dtype '" + entry.dtype_name + "'");
    entry.dtype = dtype_from_name(entry.dtype_name);
    const auto shape = value.find("shape");
    if (shape == value.end() || !shape->is_array())
      throw InputError(at + "missing or non-array \"shape\"");
    for (const json& d : *shape) {
      const std::optional<std::uint64_t> u = json_uint(d);
      if (!u || *u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        throw InputError(at + "shape " + shape->dump() + " has a dimension that is not a " +
                         "non-negative integer");
      entry.shape.push_back(static_cast<std::int64_t>(*u));
    }
    const auto offsets = value.find("data_offsets");
    if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
        !json_uint((*offsets)[0]) || !json_uint((*offsets)[1]))
      throw InputError(at + "\"data_offsets\" is not a pair of non-negative integers");
    entry.begin = *json_uint((*offsets)[0]);
    entry.end = *json_uint((*offsets)[1]);
    const std::string offsets_text =
        "data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) + "]";
    if (entry.begin > entry.end) throw InputError(at + offsets_text + " are not ordered");
    if (entry.end > data_size)
      throw InputError(at + offsets_text + " go beyond the data section (" +
                       std::to_string(data_size) + " bytes): the file is truncated or the " +
                       "offsets are out of range");
    const std::optional<std::uint64_t> numel = checked_numel(entry.shape);
    if (!numel || *numel > std::numeric_limits<std::uint64_t>::max() / *elem_size)
      throw InputError(at + "shape " + shape_text(entry.shape) + " overflows");
    const std::uint64_t need = *numel * *elem_size;
    if (entry.end - entry.begin != need)
      throw InputError(at + offsets_text + " hold " + std::to_string(entry.end - entry.begin) +
                       " bytes but shape " + shape_text(entry.shape) + " x " + entry.dtype_name +
                       " needs " + std::to_string(need));
    file.entries_.push_back(std::move(entry));
  }

  std::sort(file.entries_.begin(), file.entries_.end(),
            [](const TensorEntry& a, const TensorEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  const TensorEntry* previous = nullptr;  // the non-empty entry reaching furthest so far
  for (const TensorEntry& e : file.entries_) {
    if (e.begin == e.end) continue;
    if (previous != nullptr && e.begin < previous->end)
      throw InputError(where + "tensor '" + e.name + "' (data_offsets [" + std::to_string(e.begin) +
                       ", " + std::to_string(e.end) + "]) overlaps tensor '" + previous->name +
                       "' (data_offsets [" + std::to_string(previous->begin) + ", " +
                       std::to_string(previous->end) + "])");
    if (previous == nullptr || e.end > previous->end) previous = &e;
  }
  for (std::size_t i = 0; i < file.entries_.size(); ++i) file.index_[file.entries_[i].name] = i;
  return file;
}

const TensorEntry* SafetensorsFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

std::span<const std::byte> SafetensorsFile::bytes(const TensorEntry& entry) const {
  return map_.bytes().subspan(data_offset_ + entry.begin, entry.end - entry.begin);
}

TensorView SafetensorsFile::view(const TensorEntry& entry) const {
  if (!entry.dtype)
    throw InputError(path().string() + ": tensor '" + entry.name + "': dtype " + entry.dtype_name +
                     " is not one dice computes with (F32, F16, BF16)");
  return TensorView{entry.name, *entry.dtype, entry.shape, bytes(entry), path()};
}

std::uint64_t TensorSpec::nbytes() const {
  const std::optional<std::uint64_t> n = checked_numel(shape);
  if (!n) throw Error("tensor '" + name + "': bad shape " + shape_text(shape));
  return *n * dtype_size(dtype);
}

SafetensorsWriter::SafetensorsWriter(fs::path path, std::vector<TensorSpec> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), tensors_(std::move(tensors)) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  for (const TensorSpec& t : tensors_) {
    if (t.name == "__metadata__" || !names.insert(t.name).second)
      throw Error(path_.string() + ": tensor name '" + t.name + "' given twice or reserved");
    const std::uint64_t n = t.nbytes();
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {data_bytes_, data_bytes_ + n}}};
    data_bytes_ += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::array<char, 8> len{};
  for (std::size_t i = 0; i < 8; ++i)
    len[i] = static_cast<char>((static_cast<std::uint64_t>(text.size()) >> (8 * i)) & 0xffu);
  tmp_path_ = path_;
  tmp_path_ += ".tmp";
  out_.open(tmp_path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw Error(tmp_path_.string() + ": cannot create: " + std::strerror(errno));
  out_.write(len.data(), 8);
  out_.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out_) throw Error(tmp_path_.string() + ": write failed (disk full?)");
}

SafetensorsWriter::~SafetensorsWriter() {
  if (finished_) return;
  out_.close();
  std::error_code ec;
  fs::remove(tmp_path_, ec);
}

void SafetensorsWriter::append(std::span<const std::byte> bytes) {
  if (bytes.size() > data_bytes_ - written_)
    throw Error(path_.string() + ": " + std::to_string(written_ + bytes.size()) +
                " bytes of tensor data written, the header declares " +
                std::to_string(data_bytes_));
  out_.write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  if (!out_) throw Error(tmp_path_.string() + ": write failed (disk full?)");
  written_ += bytes.size();
}

void SafetensorsWriter::finish() {
  if (written_ != data_bytes_) {
    std::uint64_t offset = 0;
    std::string short_tensor;
    for (const TensorSpec& t : tensors_) {
      offset += t.nbytes();
      if (offset > written_) {
        short_tensor = t.name;
        break;
      }
    }
    throw Error(path_.string() + ": finished after " + std::to_string(written_) + " of " +
                std::to_string(data_bytes_) + " data bytes; tensor '" + short_tensor +
                "' is incomplete");
  }
  out_.close();
  if (!out_) throw Error(tmp_path_.string() + ": write failed on close (disk full?)");
  std::error_code ec;
  fs::rename(tmp_path_, path_, ec);
  if (ec)
    throw Error(path_.string() + ": cannot rename " + tmp_path_.string() + ": " + ec.message());
  finished_ = true;
}

void write_safetensors(
    const fs::path& path,
    const std::vector<std::pair<TensorSpec, std::span<const std::byte>>>& tensors,
    const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  for (const auto& [spec, data] : tensors) {
    if (data.size() != spec.nbytes())
      throw Error(path.string() + ": tensor '" + spec.name + "' has " +
                  std::to_string(data.size()) + " bytes, its shape needs " +
                  std::to_string(spec.nbytes()));
    specs.push_back(spec);
  }
  SafetensorsWriter writer(path, std::move(specs), metadata);
  for (const auto& [spec, data] : tensors) writer.append(data);
  writer.finish();
}

}  // namespace dice::model
