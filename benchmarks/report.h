// Presenting a benchmark run: a readable table for stdout and a JSON record written atomically.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "gpu_bench.h"
#include "host_info.h"
#include "limits.h"
#include "mlp_bench.h"
#include "sgemm_peak.h"
#include "timing.h"

namespace tinyfuse::bench {

using ojson = nlohmann::ordered_json;

struct Report {
  std::string tool_version;
  Timestamp date;
  std::optional<GitState> git;
  HostInfo host;
  std::string blas;  // cpu::blas_name()
  int threads = 0;   // cpu::num_threads()
  std::string device;
  TimingPlan plan;
  std::vector<std::string> networks;
  std::vector<uint32_t> widths = {kMlpNeurons};
  std::vector<int64_t> batches;
  std::optional<PeakResult> peak;  // the CPU's measured sgemm rate (CPU runs only)
  std::optional<GpuInfo> gpu;      // CUDA runs only
  std::optional<Stats> launch_floor;       // CUDA runs: an empty kernel timed as the networks are
  std::optional<Stats> launch_floor_host;  // ... and the host's time queuing it
  std::optional<Ceilings> ceilings;  // --ceilings: hardware limits of the GPU records
  std::optional<TorchRun> torch;     // --compare: PyTorch figures of the GPU records
  std::vector<std::string> fused_kernels_left_out;  // --fused-kernels: FullyFusedMLP kernels left out
  std::vector<CaseResult> results;
};

// "64->64x2->64 ReLU MLP (output activation None)" for one width, the n->n form for several.
std::string models_description(const std::vector<uint32_t>& widths);

// "2^20" for powers of two, the number otherwise.
std::string batch_label(int64_t batch);

// Header (tool, BLAS, threads, CPU or GPU, date, sgemm peak or ceilings) and one row per result.
void print_report(std::ostream& os, const Report& r);

// The run as JSON, keys in a fixed reading order (tool, version, date, git, host, ..., results).
ojson to_json(const Report& r);

// Creates the folder `path` will be written to and checks it is writable, so a bad --out fails
// before the measurements instead of after. Throws std::runtime_error naming the folder.
void prepare_output_folder(const std::string& path);

// Writes `text` to `path` through a temporary file in the same folder and a rename, creating the
// folder if needed. Throws std::runtime_error naming the path on failure.
void write_file_atomically(const std::string& path, const std::string& text);

// Columns of strings, padded to the widest cell; `right` marks the right-aligned (numeric) ones.
void print_table(std::ostream& os, const std::vector<std::string>& head, const std::vector<bool>& right,
                 const std::vector<std::vector<std::string>>& rows);

// Median, min and max (and every run) of `s` as JSON.
ojson stats_json(const Stats& s);

// `v` with `decimals` digits after the point.
std::string fixed(double v, int decimals);

// "3.214 M" style: three significant decimals and an SI prefix.
std::string si(double value);

}  // namespace tinyfuse::bench
