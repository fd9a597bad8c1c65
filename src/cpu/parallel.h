// Splitting batch work across the CPU's cores.
#pragma once

#include <cstdint>
#include <functional>

namespace tinyfuse::cpu {

// Calls fn(begin, end) over disjoint chunks covering [0, n), in parallel when n is large enough.
// Chunks are fixed by n and `grain` alone (not by the thread count), so a reduction that
// combines per-chunk results in chunk order is deterministic on every machine.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// Threads parallel_for uses (TINYFUSE_NUM_THREADS, else the hardware's).
int num_threads();

}  // namespace tinyfuse::cpu
