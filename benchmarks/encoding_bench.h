// Throughput of the encodings: HashGrid over 2-D and 3-D inputs, 16 levels of 2 features
// (tiny-cuda-nn's defaults otherwise), forward alone and forward + backward (parameter gradients);
// on the CPU also Frequency and TriangleWave (12 frequencies), OneBlob (32 bins) and
// SphericalHarmonics (degree 4) over 3-D inputs, forward and forward + backward (input gradients).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "timing.h"
#include "tinyfuse/common.h"

namespace tinyfuse::bench {

struct EncodingResult {
  std::string name;  // "HashGrid 2D"
  std::string mode;  // "forward" or "forward+backward"
  std::string backward_mode;  // CUDA: "fast" (float atomics) or "deterministic"; empty for forward / CPU
  int64_t batch = 0;
  size_t n_params = 0;
  std::string param_dtype, output_dtype;
  // CUDA: least bytes a run must move per sample (see gpu_encoding_bench.cpp), for the copy-bandwidth limit.
  double bytes_per_sample = 0;
  Stats seconds;
  bool ok = false;
  std::string error;
  double samples_per_second() const { return ok && seconds.median > 0 ? batch / seconds.median : 0; }
};

// The HashGrid rows on CUDA (gpu_encoding_bench.cpp, built with TINYFUSE_BENCH_CUDA): FP16
// parameters and outputs as tiny-cuda-nn runs them, forward and forward + backward in both
// backward modes, timed with CUDA events on a stream of its own, inputs rotated past the L2.
std::vector<EncodingResult> run_gpu_encoding_benchmarks(const TimingPlan& plan, const std::vector<int64_t>& batches);

// torch_hashgrid.py's JSON: copy bandwidth and samples/s by (variant, encoding, mode, batch).
struct TorchGridRun {
  std::string source;
  std::string device;  // "cpu", or the GPU's name
  double copy_bytes_per_s = 0;
  struct Figure {
    std::string variant, encoding, mode;
    int64_t batch = 0;
    double samples_per_s = 0;  // 0: the record has an error instead
  };
  std::vector<Figure> results;
};
TorchGridRun load_torch_grid_run(const std::string& path);  // throws std::runtime_error naming the file

// A GPU row against PyTorch (forward+backward rows compare with PyTorch's forward+backward,
// whatever the backward mode) and against bytes_per_sample / copy bandwidth.
struct GridComparison {
  std::optional<double> eager, compile, x_eager, x_compile, percent_of_copy_limit;
};
GridComparison compare_grid(const EncodingResult& r, const TorchGridRun* torch, double copy_bytes_per_s);

std::vector<EncodingResult> run_encoding_benchmarks(Device device, const TimingPlan& plan,
                                                    const std::vector<int64_t>& batches);

}  // namespace tinyfuse::bench
