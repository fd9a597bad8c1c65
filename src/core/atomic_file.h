// Replacing a file atomically: write a temporary file in the same directory, fsync it, rename it
// over the target, fsync the directory. Readers see the old file or the new one, never a mix.
#pragma once

#include <cstddef>
#include <string>

namespace tinyfuse {

// Writes `size` bytes to `path` atomically. On any failure the temporary file is removed, the
// file previously at `path` (if any) is left as it was, and tinyfuse::Error is thrown with a
// message starting with `who` that names the path and the system error. Temporary files that
// earlier saves to `path` left behind when their process was killed are removed first
// (remove_stale_temporaries).
void write_file_atomic(const std::string& path, const void* data, size_t size, const std::string& who);

// The name write_file_atomic() gives its temporary files for `path`, without the unique suffix:
// "<dir>/.<name>.tmp-". Exposed for tests that check nothing is left behind.
std::string atomic_temp_prefix(const std::string& path);

// How long a temporary file must have been left untouched before it counts as stale.
constexpr long kStaleTemporarySeconds = 600;

// Removes the temporary files of interrupted saves to `path`: only files named as
// write_file_atomic names them for this path (prefix, then "<pid>-<n>-<n>"), regular files (not
// links) owned by this user, whose process is no longer running on this machine and that were
// last modified more than kStaleTemporarySeconds ago (a save still in progress elsewhere, say on
// a shared filesystem, keeps writing to its file). Best effort: returns how many it removed and
// never throws.
int remove_stale_temporaries(const std::string& path) noexcept;

}  // namespace tinyfuse
