// Writing output files so that a reader never sees a half-written one.
#pragma once

#include <cstddef>
#include <string>

namespace tinyfuse::cli {

// Writes `size` bytes to a temporary file in the directory of `path`, flushes it to disk and
// renames it over `path`. Throws std::runtime_error naming the file on failure.
void write_file_atomically(const std::string& path, const void* data, size_t size);
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace tinyfuse::cli
