// Timing runs of GPU work with CUDA events (tinyfuse-bench's CUDA path; compiled only with
// TINYFUSE_BENCH_CUDA).
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "timing.h"

namespace tinyfuse::bench {

// Throws std::runtime_error naming `what` and the CUDA error unless `e` is cudaSuccess: the one
// check of every CUDA runtime call in tinyfuse-bench.
void check_cuda(cudaError_t e, const char* what);

// `plan.warmup` runs, then `plan.repeats` runs each between its own start and stop event on
// `stream`; work(i) queues run i (i counts warm-up runs too, so an input rotation continues).
// With plan.sync_each_run the host waits for each run's stop event before queuing the next, and
// then calls after(i) when given (reads there are not timed); otherwise the runs are queued back to
// back and `after` is not called. Returns the GPU seconds per run (events) and the host seconds
// spent queuing each run.
struct Timed {
  Stats gpu, host;
};
Timed time_with_events(const TimingPlan& plan, cudaStream_t stream, const std::function<void(int)>& work,
                       const std::function<void(int)>& after = nullptr);

}  // namespace tinyfuse::bench
