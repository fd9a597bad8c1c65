// The CPU "hardware limit" the MLP results are compared with: the FP32 rate the same BLAS reaches
// on a square matmul (1024^3 by default), measured in the same run on the same machine.
#pragma once

#include <cstdint>
#include <string>

#include "timing.h"

namespace tinyfuse::bench {

struct PeakResult {
  int64_t size = 1024;  // C (size x size) = A (size x size) * B (size x size)
  Stats seconds;        // per sgemm call
  bool ok = false;
  std::string error;

  double flop() const { return 2.0 * static_cast<double>(size) * size * size; }
  double gflops() const { return flop() / seconds.median * 1e-9; }      // from the median time
  double gflops_min() const { return flop() / seconds.max * 1e-9; }     // slowest run
  double gflops_max() const { return flop() / seconds.min * 1e-9; }     // fastest run
};

PeakResult measure_sgemm_peak(const TimingPlan& plan, int64_t size = 1024, uint64_t seed = 7);

}  // namespace tinyfuse::bench
