// Throughput of the grid encodings: HashGrid over 2-D and 3-D inputs, 16 levels of 2 features
// (tiny-cuda-nn's defaults otherwise), forward alone and forward + backward (parameter gradients).
#pragma once

#include <string>
#include <vector>

#include "timing.h"
#include "tinyfuse/common.h"

namespace tinyfuse::bench {

struct EncodingResult {
  std::string name;  // "HashGrid 2D"
  std::string mode;  // "forward" or "forward+backward"
  int64_t batch = 0;
  size_t n_params = 0;
  Stats seconds;
  bool ok = false;
  std::string error;
  double samples_per_second() const { return ok && seconds.median > 0 ? batch / seconds.median : 0; }
};

std::vector<EncodingResult> run_encoding_benchmarks(Device device, const TimingPlan& plan,
                                                    const std::vector<int64_t>& batches);

}  // namespace tinyfuse::bench
