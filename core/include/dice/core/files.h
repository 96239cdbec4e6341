#pragma once
// Small file helpers whose errors name the file.

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace dice {

/// Whole file as bytes. Throws dice::InputError naming `path` if it cannot be read.
std::string read_file(const std::filesystem::path& path);

/// Writes `content` to `path` atomically (temporary file in the same folder, then rename), creating
/// parent folders. Throws dice::Error naming `path` on failure.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

/// The last `max_bytes` bytes of a file (all of it if shorter; empty if it does not exist).
std::string read_file_tail(const std::filesystem::path& path, std::size_t max_bytes);

/// The last `max_bytes` bytes of `text`, cut at a line start when one is near.
std::string tail_text(std::string_view text, std::size_t max_bytes);

/// Appends `line` and a newline to `output`, cutting `output` to its tail (tail_text) whenever it
/// grows past twice `max_bytes`: a child's output read line by line keeps its last `max_bytes`
/// (after a final tail_text) in bounded memory.
void append_line_tail(std::string& output, std::string_view line, std::size_t max_bytes);

}  // namespace dice
