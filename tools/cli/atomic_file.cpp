#include "atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <unistd.h>

namespace tinyfuse::cli {

namespace {
[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw std::runtime_error("cannot " + what + " '" + path + "': " + std::strerror(err));
}
}  // namespace

void write_file_atomically(const std::string& path, const void* data, size_t size) {
  // Same directory as the target, so the rename stays on one file system and is atomic.
  const std::string tmp = path + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("create", tmp, errno);
  const bool written = size == 0 || std::fwrite(data, 1, size, f) == size;
  int err = errno;
  const bool flushed = written && std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  if (written && !flushed) err = errno;
  const bool closed = std::fclose(f) == 0;
  if (written && flushed && !closed) err = errno;
  if (!(written && flushed && closed)) {
    std::remove(tmp.c_str());
    fail("write", tmp, err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    fail("rename a temporary file to", path, err);
  }
}

void write_file_atomically(const std::string& path, const std::string& text) {
  write_file_atomically(path, text.data(), text.size());
}

}  // namespace tinyfuse::cli
