// Hardware limits and PyTorch figures for GPU results, both read from the JSON that
// benchmarks/torch/torch_mlp.py writes ({"ceilings": ..., "results": [...]}), and the ratios
// a tinyfuse record is reported with.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mlp_bench.h"

namespace tinyfuse::bench {

// torch_mlp.py's "ceilings": device copy bandwidth (bytes read + written per second) and the
// matmul rates (8192^3) by precision ("fp16", "fp32"; FP32 is true FP32, TF32 off).
struct Ceilings {
  std::string source;  // the file
  std::string tool, date, device;
  double copy_bytes_per_s = 0;
  std::optional<double> matmul_fp16, matmul_fp32;

  // FLOP/s of the matmul of `precision` ("fp16", "fp32"); nullopt when the file has none.
  std::optional<double> matmul(const std::string& precision) const;
};

// One torch_mlp.py record: variant "eager" / "compile", precision "fp32" / "fp16".
struct TorchFigure {
  std::string variant, precision, mode;
  int64_t width = 0, batch = 0;
  std::optional<double> samples_per_s, median_s;
  std::string error;  // when the record has no figure
};

struct TorchRun {
  std::string source, tool, date, torch_version, device;
  std::vector<TorchFigure> results;

  // The record of the same variant, precision, mode, width and batch, or null.
  const TorchFigure* find(const std::string& variant, const std::string& precision, const std::string& mode,
                          int64_t width, int64_t batch) const;
};

// The JSON of a file another tool wrote; throws std::runtime_error naming `what` and the file when it
// cannot be opened or is not JSON.
json read_json_file(const std::string& path, const std::string& what);

// Both throw std::runtime_error naming the file when it cannot be read or lacks the fields.
Ceilings load_ceilings(const std::string& path);
TorchRun load_torch_run(const std::string& path);

// A record against the ceilings: the samples/s the copy bandwidth allows (bytes_per_sample) and
// the samples/s the matmul rate of its precision allows (flop_per_sample); the lower one binds.
struct HardwareLimit {
  double memory_samples_per_s = 0;
  std::optional<double> compute_samples_per_s;  // none without a matmul rate for the precision
  std::string binding;                          // "memory" or "compute"
  double binding_samples_per_s = 0;
  double percent_of_memory = 0;
  std::optional<double> percent_of_compute;
  double percent_of_binding = 0;
};
std::optional<HardwareLimit> hardware_limit(const CaseResult& r, const Ceilings& c);

// tinyfuse samples/s over PyTorch's for one variant.
struct TorchComparison {
  std::string variant;
  const TorchFigure* figure = nullptr;  // null: no such record in the file
  std::optional<double> ratio;          // tinyfuse / PyTorch, when both have a figure
};
std::vector<TorchComparison> compare_with_torch(const CaseResult& r, const TorchRun& t);

// Precision of the PyTorch records (and matmul ceiling) a record is compared with: the network's
// own ("fp16" networks against torch fp16, "fp32" against fp32), or, when it failed to build,
// expected_precision() of its otype.
std::string comparison_precision(const CaseResult& r);

}  // namespace tinyfuse::bench
