// Running a workload's rows: for each training batch a fresh model trained for the warm-up and
// timed steps, then the inference rows on the last trained model. Inputs, targets and outputs
// rotate through buffers past the caches (rotation.h); every row checks what it produced
// (checks.h). The timing is the RunTimer's: steady_clock on the CPU, CUDA events on a GPU.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mlp_bench.h"  // Mode
#include "timing.h"
#include "tinyfuse/common.h"
#include "tinyfuse/fused_kernel_options.h"
#include "workloads/spec.h"

namespace tinyfuse::bench {

class RunTimer {
 public:
  virtual ~RunTimer() = default;
  virtual Device device() const = 0;
  // Where the work goes: every TensorView of a run carries it.
  virtual Stream stream() const = 0;
  // Whether a value may be read back after each timed run without the read being timed (the CPU;
  // a GPU whose host waits for each run). Otherwise reads wait until all runs are done.
  virtual bool reads_between_runs() const = 0;
  struct Result {
    Stats seconds;              // per run
    std::optional<Stats> host;  // GPU: the host's time queuing each run
  };
  // plan.warmup untimed runs, then plan.repeats timed ones, of work(i) (i counts from 0 over all
  // of them); after each timed run, outside its timing, after(i) when reads_between_runs().
  virtual Result time(const TimingPlan& plan, const std::function<void(int)>& work,
                      const std::function<void(int)>& after) = 0;
  // Waits for every piece of queued set-up work.
  virtual void settle() = 0;
  // Bytes the buffers a row cycles through must exceed (rotation.h): past the device's caches.
  virtual size_t rotation_bytes() const = 0;
  // After the set-up, before the runs: leaves nothing the runs will read in a cache (the CPU
  // writes a buffer larger than its caches; a GPU's set-up copies go through its L2, which the
  // warm-up runs' own traffic, past the rotation size, clears).
  virtual void evict_caches() = 0;
  // "std::chrono::steady_clock" / "CUDA events ..."
  virtual std::string clock() const = 0;
};

// `largest_cache_bytes`: the CPU's last-level cache (host_info.h); the rotation and the eviction
// cover twice that (at least rotation.h's kRotationMinBytes).
std::unique_ptr<RunTimer> make_cpu_run_timer(size_t largest_cache_bytes);
// CUDA events on a stream of its own (gpu_run_timer.cpp, in builds with TINYFUSE_BENCH_CUDA).
std::unique_ptr<RunTimer> make_gpu_run_timer(bool sync_each_run);

struct WorkloadCheck {
  std::string name;  // "finite", "repeatable", "reference", "first loss", "loss falls", "parameters finite"
  bool ok = false;
  std::string detail;
};

struct WorkloadRow {
  std::string id, name, device;
  Mode mode = Mode::Training;
  int64_t batch = 0;
  bool ok = false;      // it ran (the checks say whether what it produced is right)
  std::string error;
  RunTimer::Result timing;
  // The model.
  size_t n_params = 0;
  std::string param_dtype, output_dtype;
  uint32_t padded_output_width = 0;
  // Rotation: buffers cycled through and their bytes (inputs, targets or outputs).
  int buffers = 0;
  double rotated_bytes = 0;
  // Per sample: the streams a row cannot avoid (input read; target read in training, output
  // written in inference), the grid's traffic and the tensor FLOP (workload_cost).
  double input_bytes = 0, target_bytes = 0, output_bytes = 0;
  double grid_bytes_per_sample = 0, grid_table_bytes = 0;
  double flop_per_sample = 0;
  // Checks.
  std::vector<WorkloadCheck> checks;
  // Training: the loss of the first (untimed) step, the host's loss of the same model on the same
  // batch, and the loss of every timed step (when read between runs) or of the last one.
  double first_loss = 0, host_first_loss = 0;
  std::vector<double> losses;
  // Inference: the model it ran on had this many training steps; its outputs against the CPU
  // FP64 reference on `reference_rows` rows, and its loss against the workload's target there.
  int trained_steps = 0;
  int reference_rows = 0;
  double reference_error = 0, reference_tolerance = 0, loss_vs_target = 0;

  double samples_per_second() const { return ok ? static_cast<double>(batch) / timing.seconds.median : 0; }
  double stream_bytes_per_sample() const { return input_bytes + target_bytes + output_bytes; }
  bool checks_ok() const;
};

struct WorkloadPlan {
  TimingPlan timing;
  std::vector<Mode> modes = {Mode::Training, Mode::Inference};
  std::optional<std::vector<int>> batch_log2;  // overrides the workload's defaults for both modes
  int reference_rows = 256;
  FusedKernelOptions fused_kernels;  // --fused-kernels: FullyFusedMLP kernel families left out
};

// Runs every row of `w` on timer.device(). Errors (a config this build cannot run, out of memory)
// come back as rows with ok == false. `progress` gets a line per row as it finishes.
std::vector<WorkloadRow> run_workload(const WorkloadSpec& w, const WorkloadPlan& plan, RunTimer& timer, uint64_t seed,
                                      const std::function<void(const WorkloadRow&)>& progress);

}  // namespace tinyfuse::bench
