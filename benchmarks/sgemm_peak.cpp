#include "sgemm_peak.h"

#include <exception>
#include <vector>

#include "cpu/blas.h"
#include "tinyfuse/random.h"

namespace tinyfuse::bench {

PeakResult measure_sgemm_peak(const TimingPlan& plan, int64_t size, uint64_t seed) {
  PeakResult r;
  r.size = size;
  try {
    const size_t n = static_cast<size_t>(size) * static_cast<size_t>(size);
    std::vector<float> a(n), b(n), c(n, 0.0f);
    Pcg32 rng(seed);
    for (float& x : a) x = rng.uniform(-1.0f, 1.0f);
    for (float& x : b) x = rng.uniform(-1.0f, 1.0f);
    r.seconds = time_runs(
        plan, [] {},
        [&] { cpu::gemm(false, false, size, size, size, 1.0f, a.data(), size, b.data(), size, 0.0f, c.data(), size); });
    r.ok = true;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

}  // namespace tinyfuse::bench
