// Replacing a file atomically: write a temporary file in the same directory, fsync it, rename it
// over the target, fsync the directory. Readers see the old file or the new one, never a mix.
#pragma once

#include <cstddef>
#include <string>

namespace tinyfuse {

// Writes `size` bytes to `path` atomically. On any failure the temporary file is removed, the
// file previously at `path` (if any) is left as it was, and tinyfuse::Error is thrown with a
// message starting with `who` that names the path and the system error.
void write_file_atomic(const std::string& path, const void* data, size_t size, const std::string& who);

// The name write_file_atomic() gives its temporary files for `path`, without the unique suffix:
// "<dir>/.<name>.tmp-". Exposed for tests that check nothing is left behind.
std::string atomic_temp_prefix(const std::string& path);

}  // namespace tinyfuse
