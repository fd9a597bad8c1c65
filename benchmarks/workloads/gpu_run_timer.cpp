// The workloads' RunTimer on a GPU: CUDA events on a non-blocking stream of its own (compiled only
// with TINYFUSE_BENCH_CUDA).
#include <cuda_runtime.h>

#include <stdexcept>

#include "gpu_timing.h"
#include "rotation.h"
#include "workloads/runner.h"

namespace tinyfuse::bench {

namespace {

class GpuRunTimer final : public RunTimer {
 public:
  explicit GpuRunTimer(bool sync_each_run) : sync_(sync_each_run) {
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  ~GpuRunTimer() override {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  Device device() const override { return Device::CUDA; }
  Stream stream() const override { return stream_; }
  bool reads_between_runs() const override { return sync_; }
  Result time(const TimingPlan& plan, const std::function<void(int)>& work,
              const std::function<void(int)>& after) override {
    TimingPlan p = plan;
    p.sync_each_run = sync_;
    const Timed t = time_with_events(p, stream_, work, sync_ ? after : nullptr);
    return {t.gpu, t.host};
  }
  void settle() override { check_cuda(cudaDeviceSynchronize(), "workload set-up"); }
  size_t rotation_bytes() const override { return kRotationMinBytes; }
  void evict_caches() override {}
  std::string clock() const override {
    return std::string("CUDA events, one pair per run on the benchmark's non-blocking stream, ") +
           (sync_ ? "host waits for each run" : "runs queued back to back");
  }

 private:
  bool sync_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<RunTimer> make_gpu_run_timer(bool sync_each_run) { return std::make_unique<GpuRunTimer>(sync_each_run); }

}  // namespace tinyfuse::bench
