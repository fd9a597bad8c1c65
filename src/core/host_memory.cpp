#include "core/host_memory.h"

#include <unistd.h>

#include "tinyfuse/errors.h"

namespace tinyfuse {

OutOfMemoryError::OutOfMemoryError(size_t bytes, const std::string& what, const std::string& why)
    : Error("out of memory: needed " +
            (bytes == SIZE_MAX ? std::string("more than 2^64 bytes")
             : bytes == 0      ? std::string("more memory")
                               : std::to_string(bytes) + " bytes") +
            " for " + what + " (" + why + "); nothing was changed"),
      bytes_(bytes) {}

uint64_t host_memory_bytes() {
  static const uint64_t bytes = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : UINT64_MAX;
  }();
  return bytes;
}

void check_host_request(size_t bytes, const std::string& what) {
  if (bytes > host_memory_bytes())
    throw OutOfMemoryError(bytes, what, "this machine has " + std::to_string(host_memory_bytes()) + " bytes of memory");
}

size_t checked_bytes(std::initializer_list<int64_t> factors, const std::string& what, bool host) {
  size_t total = 1;
  for (const int64_t f : factors) {
    if (f < 0) throw OutOfMemoryError(SIZE_MAX, what, "a negative size " + std::to_string(f));
    if (__builtin_mul_overflow(total, static_cast<uint64_t>(f), &total))
      throw OutOfMemoryError(SIZE_MAX, what, "the size overflows 64 bits");
  }
  if (host) check_host_request(total, what);
  return total;
}

}  // namespace tinyfuse
