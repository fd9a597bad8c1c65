// CUDA path of tinyfuse-bench: timing runs with CUDA events (compiled only with TINYFUSE_BENCH_CUDA).
#include "gpu_timing.h"

#include <chrono>
#include <stdexcept>
#include <vector>

namespace tinyfuse::bench {

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

namespace {

struct Events {
  std::vector<cudaEvent_t> start, stop;
  explicit Events(int n) {
    start.assign(static_cast<size_t>(n), nullptr);
    stop.assign(static_cast<size_t>(n), nullptr);
    for (int i = 0; i < n; ++i) {
      check_cuda(cudaEventCreate(&start[static_cast<size_t>(i)]), "cudaEventCreate");
      check_cuda(cudaEventCreate(&stop[static_cast<size_t>(i)]), "cudaEventCreate");
    }
  }
  ~Events() {
    for (cudaEvent_t e : start)
      if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : stop)
      if (e) cudaEventDestroy(e);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
};

}  // namespace

Timed time_with_events(const TimingPlan& plan, cudaStream_t stream, const std::function<void(int)>& work,
                       const std::function<void(int)>& after) {
  using Clock = std::chrono::steady_clock;
  int run = 0;
  for (int i = 0; i < plan.warmup; ++i) {
    work(run++);
    if (plan.sync_each_run) check_cuda(cudaStreamSynchronize(stream), "warm-up run");
  }
  check_cuda(cudaStreamSynchronize(stream), "warm-up runs");
  Events ev(plan.repeats);
  std::vector<double> host;
  host.reserve(static_cast<size_t>(plan.repeats));
  for (int i = 0; i < plan.repeats; ++i) {
    const size_t k = static_cast<size_t>(i);
    check_cuda(cudaEventRecord(ev.start[k], stream), "cudaEventRecord");
    const Clock::time_point t0 = Clock::now();
    work(run++);
    host.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    check_cuda(cudaEventRecord(ev.stop[k], stream), "cudaEventRecord");
    if (plan.sync_each_run) {
      check_cuda(cudaEventSynchronize(ev.stop[k]), "timed run");
      if (after) after(run - 1);
    }
  }
  check_cuda(cudaStreamSynchronize(stream), "timed runs");
  std::vector<double> seconds;
  seconds.reserve(static_cast<size_t>(plan.repeats));
  for (int i = 0; i < plan.repeats; ++i) {
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, ev.start[static_cast<size_t>(i)], ev.stop[static_cast<size_t>(i)]),
          "cudaEventElapsedTime");
    seconds.push_back(static_cast<double>(ms) * 1e-3);
  }
  return {summarize(std::move(seconds)), summarize(std::move(host))};
}

}  // namespace tinyfuse::bench
