#include "core/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "tinyfuse/errors.h"

namespace tinyfuse {

namespace {

std::string quoted(const std::string& s) { return "\"" + s + "\""; }
std::string sys_error(int err) { return std::strerror(err); }

// Owns the temporary file until it is renamed into place; removes it otherwise.
class TempFile {
 public:
  TempFile(std::string name, int fd) : name_(std::move(name)), fd_(fd) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!name_.empty()) ::unlink(name_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  int fd() const { return fd_; }
  const std::string& name() const { return name_; }
  // Closes the descriptor; returns 0 or errno.
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }
  void release() { name_.clear(); }

 private:
  std::string name_;
  int fd_;
};

// The pid in "<pid>-<n>-<n>" (the suffix write_file_atomic gives its temporary files), or -1
// when `suffix` is not of that form.
long pid_of_suffix(const std::string& suffix) {
  size_t field = 0, digits = 0;
  long pid = 0;
  for (const char c : suffix) {
    if (c == '-') {
      if (digits == 0 || ++field > 2) return -1;
      digits = 0;
    } else if (c >= '0' && c <= '9') {
      if (++digits > 19) return -1;
      if (field == 0) {
        if (pid > 100000000) return -1;  // beyond any pid
        pid = pid * 10 + (c - '0');
      }
    } else {
      return -1;
    }
  }
  return field == 2 && digits > 0 && pid > 0 ? pid : -1;
}

}  // namespace

int remove_stale_temporaries(const std::string& path) noexcept {
  try {
    namespace fs = std::filesystem;
    const fs::path target(path);
    const std::string dir = target.parent_path().empty() ? "." : target.parent_path().string();
    const std::string name_prefix = "." + target.filename().string() + ".tmp-";
    DIR* d = ::opendir(dir.c_str());
    if (!d) return 0;
    struct Closer {
      DIR* d;
      ~Closer() { ::closedir(d); }
    } closer{d};
    const std::time_t now = std::time(nullptr);
    int removed = 0;
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.compare(0, name_prefix.size(), name_prefix) != 0) continue;
      const long pid = pid_of_suffix(name.substr(name_prefix.size()));
      if (pid < 0 || pid == static_cast<long>(::getpid())) continue;
      const std::string file = dir + "/" + name;
      struct stat st {};
      if (::lstat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
      if (now - st.st_mtime <= kStaleTemporarySeconds) continue;
      if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // its process may still be writing
      if (::unlink(file.c_str()) == 0) ++removed;
    }
    return removed;
  } catch (...) {
    return 0;
  }
}

std::string atomic_temp_prefix(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.parent_path();
  const std::string name = "." + target.filename().string() + ".tmp-";
  return dir.empty() ? name : (dir / name).string();
}

void write_file_atomic(const std::string& path, const void* data, size_t size, const std::string& who) {
  namespace fs = std::filesystem;
  if (path.empty()) throw Error(who + ": the path is empty");
  const fs::path target(path);
  if (!target.has_filename() || target.filename() == "." || target.filename() == "..")
    throw Error(who + ": " + quoted(path) + " names a directory, not a file");
  const std::string dir = target.parent_path().empty() ? "." : target.parent_path().string();
  remove_stale_temporaries(path);

  // A unique temporary file next to the target, so that rename() stays within one filesystem.
  static std::atomic<uint64_t> counter{0};
  const std::string prefix = atomic_temp_prefix(path);
  std::string temp_name;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    const uint64_t stamp = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    temp_name = prefix + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)) + "-" +
                std::to_string(stamp % 1000000007u);
    fd = ::open(temp_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      throw Error(who + ": cannot create a temporary file in directory " + quoted(dir) + " to write " + quoted(path) +
                  ": " + sys_error(errno));
  }
  if (fd < 0) throw Error(who + ": cannot create a unique temporary file in directory " + quoted(dir));
  TempFile temp(temp_name, fd);

  auto fail = [&](const std::string& step, int err) {
    std::error_code ec;
    const bool existed = fs::exists(path, ec);
    throw Error(who + ": writing " + quoted(path) + " failed: " + step + ": " + sys_error(err) + "; " +
                (existed ? "what was at that path before was left unchanged" : "no file was written") +
                " and the temporary file was removed");
  };

  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    const ssize_t n = ::write(temp.fd(), p, std::min<size_t>(left, size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write to temporary file " + quoted(temp.name()), errno);
    }
    if (n == 0) fail("write to temporary file " + quoted(temp.name()), EIO);
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(temp.fd()) != 0) fail("fsync of temporary file " + quoted(temp.name()), errno);
  if (const int err = temp.close()) fail("close of temporary file " + quoted(temp.name()), err);
  if (::rename(temp.name().c_str(), path.c_str()) != 0) fail("rename of the temporary file over the target", errno);
  temp.release();

  // Make the rename itself durable. Best effort: some filesystems cannot fsync directories, and
  // the new file is in place already.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace tinyfuse
