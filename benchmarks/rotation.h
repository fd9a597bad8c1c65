// How many buffers a benchmark cycles its inputs (targets, outputs) through, so that no run finds
// in a cache what an earlier run of the cycle left there: at least kRotationMinBuffers, and more
// when needed for the set to exceed kRotationMinBytes (several times the L2 of current GPUs, which
// hold tens of MB, and past the last-level cache of the CPUs the benchmark runs on).
#pragma once

#include <cstddef>

namespace tinyfuse::bench {

constexpr int kRotationMinBuffers = 4;
constexpr size_t kRotationMinBytes = size_t{256} << 20;

// How many buffers of `bytes_per_run` the runs cycle through (see above); `min_total_bytes` raises
// the total for machines with larger caches.
int rotation_buffers(size_t bytes_per_run, size_t min_total_bytes = kRotationMinBytes);

}  // namespace tinyfuse::bench
