// The CUDA path of tinyfuse-bench: the same MLP cases timed on the GPU with CUDA events.
// The declarations are plain C++ (no CUDA headers); gpu_bench.cpp, which defines GpuBench, is
// compiled only when tinyfuse is built with its CUDA backend (TINYFUSE_BENCH_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "mlp_bench.h"
#include "rotation.h"
#include "tinyfuse/fused_kernel_options.h"
#include "timing.h"

namespace tinyfuse::bench {

struct GpuInfo {
  int index = 0;
  std::string name;                 // cudaDeviceProp::name
  int cc_major = 0, cc_minor = 0;   // compute capability
  int sm_count = 0;
  size_t memory_bytes = 0;          // total global memory
  int l2_bytes = 0;
  std::string pci_bus;              // "0000:1b:00.0"
  int driver_version = 0, runtime_version = 0;  // 13000 = 13.0
};

// "13.0" from 13000.
inline std::string cuda_version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// One GPU (the current device), one non-blocking stream created for the benchmark, and a pool of
// random numbers made once on the host (PCG32, uniform in [-1, 1)) and copied to the device,
// from which every input and target buffer is filled (device-to-device, at different offsets).
class GpuBench {
 public:
  // Throws std::runtime_error when there is no usable GPU.
  // fused_kernels: the FullyFusedMLP kernels its networks may run (BuildOptions::fused_kernels).
  explicit GpuBench(uint64_t seed = 1337, FusedKernelOptions fused_kernels = {});
  ~GpuBench();
  GpuBench(const GpuBench&) = delete;
  GpuBench& operator=(const GpuBench&) = delete;

  const GpuInfo& info() const;

  // Seconds per run of an empty kernel timed exactly as run() times a network: the floor under
  // every per-call figure (host launch, the GPU picking the kernel up, the events); `host` is the
  // host's time queuing it, the floor under the networks' host figures.
  struct Floor {
    Stats gpu, host;
  };
  Floor launch_floor(const TimingPlan& plan);

  // Builds the network (or trainer) on Device::CUDA and times it:
  //   inference: network->inference(input, output)
  //   training:  Trainer::training_step_async(input, target) (L2 loss, Adam); the loss is read
  //              back once, after the timed runs.
  // Every run is bracketed by its own pair of CUDA events on the benchmark stream; plan.warmup
  // untimed runs come first; with plan.sync_each_run the host waits for each run's stop event
  // before queuing the next run (as torch_mlp.py does), otherwise the runs are queued back to back.
  // Errors (a network this build cannot make, CUDA errors) come back as ok == false.
  CaseResult run(const MlpCase& c, const TimingPlan& plan, uint64_t seed);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tinyfuse::bench
