#include "timing.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace tinyfuse::bench {

Stats summarize(std::vector<double> runs) {
  if (runs.empty()) throw std::invalid_argument("summarize: no runs");
  Stats s;
  s.runs = runs;
  std::sort(runs.begin(), runs.end());
  const size_t n = runs.size();
  s.median = n % 2 ? runs[n / 2] : 0.5 * (runs[n / 2 - 1] + runs[n / 2]);
  s.min = runs.front();
  s.max = runs.back();
  return s;
}

Stats time_runs(const TimingPlan& plan, const std::function<void()>& prepare, const std::function<void()>& work) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < plan.warmup; ++i) {
    prepare();
    work();
  }
  std::vector<double> runs;
  runs.reserve(static_cast<size_t>(plan.repeats));
  for (int i = 0; i < plan.repeats; ++i) {
    prepare();
    const auto start = clock::now();
    work();
    const auto stop = clock::now();
    runs.push_back(std::chrono::duration<double>(stop - start).count());
  }
  return summarize(std::move(runs));
}

}  // namespace tinyfuse::bench
