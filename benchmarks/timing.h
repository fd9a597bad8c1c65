// Timing a piece of work with std::chrono::steady_clock: warm-up runs, then timed runs,
// summarised by median, min and max.
#pragma once

#include <functional>
#include <vector>

namespace tinyfuse::bench {

struct TimingPlan {
  int warmup = 3;
  int repeats = 10;
  // GPU runs only: wait for each timed run to finish before queuing the next (default, as the
  // PyTorch side does) or queue them back to back. CPU runs always finish inside the run.
  bool sync_each_run = true;
};

// Seconds per run over the timed runs.
struct Stats {
  double median = 0, min = 0, max = 0;
  std::vector<double> runs;  // in the order they ran
};

// Median (mean of the two middle values for an even count), min and max of `runs`.
Stats summarize(std::vector<double> runs);

// Runs `prepare` (untimed) then `work` (timed) plan.warmup times without recording, then
// plan.repeats times recording the duration of `work` alone. `work` must return only once its
// work is done (synchronize a device inside it).
Stats time_runs(const TimingPlan& plan, const std::function<void()>& prepare, const std::function<void()>& work);

}  // namespace tinyfuse::bench
