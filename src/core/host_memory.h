// Sizes of memory requests, checked before anything is allocated: a size whose arithmetic would
// overflow, or that exceeds the host's physical memory, becomes an OutOfMemoryError instead of a
// wrapped-around size, a failed allocation deep in a kernel, or a machine driven into swap or the
// OOM killer. (docs/ERRORS.md, "Out of memory".)
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace tinyfuse {

// Physical memory of this machine in bytes (read once).
uint64_t host_memory_bytes();

// The product of `factors` (element counts and element sizes) in bytes; throws OutOfMemoryError
// naming `what` when a factor is negative, the product overflows size_t or, for host memory
// (`host` true), it exceeds host_memory_bytes().
size_t checked_bytes(std::initializer_list<int64_t> factors, const std::string& what, bool host = true);

// Throws OutOfMemoryError when `bytes` of host memory cannot be had on this machine.
void check_host_request(size_t bytes, const std::string& what);

}  // namespace tinyfuse
