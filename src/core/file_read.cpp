#include "core/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tinyfuse/errors.h"

namespace tinyfuse {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what,
                              const std::string& limit) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw Error(what + ": cannot open the file: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(what + ": cannot stat the file: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw Error(what + ": is " + kind_of(st.st_mode) + ", not a regular file; only regular files are read");
  const auto too_large = [&](const std::string& size) {
    return Error(what + ": the file holds " + size + " bytes, more than the " + std::to_string(max_bytes) +
                 " bytes allowed (" + limit + ")");
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) throw too_large(std::to_string(st.st_size));
  std::string bytes;
  bytes.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(what + ": reading the file failed at byte " + std::to_string(bytes.size()) + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    if (bytes.size() + static_cast<uint64_t>(n) > max_bytes) throw too_large("more than " + std::to_string(max_bytes));  // it grew
    bytes.append(buf, static_cast<size_t>(n));
  }
  return bytes;
}

}  // namespace tinyfuse
