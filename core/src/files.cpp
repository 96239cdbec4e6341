#include "dice/core/files.h"

#include <fstream>
#include <functional>
#include <sstream>
#include <system_error>
#include <thread>

#include <unistd.h>

#include "dice/core/error.h"

namespace dice {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read file " + path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw InputError("error while reading file " + path.string());
  return std::move(buffer).str();
}

void write_file_atomic(const fs::path& path, std::string_view content) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  if (ec) throw Error("cannot create folder " + path.parent_path().string() + ": " + ec.message());
  fs::path tmp = path;
  // Unique per process and thread: threads of one process may write the same path at once.
  tmp += ".tmp." + std::to_string(::getpid()) + "." +
         std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write file " + tmp.string());
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!out) throw Error("error while writing file " + tmp.string());
  }
  fs::rename(tmp, path, ec);
  if (ec)
    throw Error("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
}

std::string read_file_tail(const fs::path& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const auto size = static_cast<std::size_t>(in.tellg());
  const std::size_t start = size > max_bytes ? size - max_bytes : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::string out(size - start, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<std::size_t>(in.gcount()));
  return start > 0 ? tail_text(out, max_bytes) : out;
}

void append_line_tail(std::string& output, std::string_view line, std::size_t max_bytes) {
  output += line;
  output += '\n';
  if (output.size() > 2 * max_bytes) output = tail_text(output, max_bytes);
}

std::string tail_text(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::string_view tail = text.substr(text.size() - max_bytes);
  const auto newline = tail.find('\n');
  if (newline != std::string_view::npos && newline < 200) tail.remove_prefix(newline + 1);
  return std::string(tail);
}

}  // namespace dice
