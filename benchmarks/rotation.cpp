#include "rotation.h"

#include <algorithm>

namespace tinyfuse::bench {

int rotation_buffers(size_t bytes_per_run, size_t min_total_bytes) {
  if (bytes_per_run == 0) return kRotationMinBuffers;
  const size_t needed = std::max(kRotationMinBytes, min_total_bytes) / bytes_per_run + 1;  // strictly more than kRotationMinBytes
  return static_cast<int>(std::max<size_t>(kRotationMinBuffers, needed));
}

}  // namespace tinyfuse::bench
