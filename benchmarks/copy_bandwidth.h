// The CPU's memory limit the workload rows are compared with: the rate the machine copies a buffer
// far larger than its caches (bytes read + written per second, on the CPU backend's threads),
// measured in the same run.
#pragma once

#include <cstddef>
#include <string>

#include "timing.h"

namespace tinyfuse::bench {

struct CopyRate {
  size_t bytes = 0;  // copied per run
  Stats seconds;
  bool ok = false;
  std::string error;
  double bytes_per_second() const { return 2.0 * static_cast<double>(bytes) / seconds.median; }
};

CopyRate measure_copy_bandwidth(const TimingPlan& plan, size_t bytes = size_t{256} << 20);

}  // namespace tinyfuse::bench
