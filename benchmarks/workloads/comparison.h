// The other implementations' figures of the same workloads, read from the JSON their runs write:
// PyTorch eager and torch.compile (benchmarks/torch/torch_workloads.py), tinyfuse.tcnn
// (benchmarks/python/tcnn_workloads.py) and upstream tiny-cuda-nn with JIT fusion off and on
// (tcnn_workloads.py --module tinycudann, or scripts/gpu/tinyfuse-gpu workloads from upstream's
// own programs). Every file holds {"results": [{"variant", "workload", "mode", "batch", "device",
// "samples_per_s" | "error", ...}]}; a row is matched by workload id, mode, batch and device.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "workloads/runner.h"

namespace tinyfuse::bench {

// The variants a row is shown beside, in column order.
inline const char* const kTorchEager = "torch-eager";
inline const char* const kTorchCompile = "torch-compile";
inline const char* const kTinyfuseTcnn = "tinyfuse.tcnn";
// Upstream tiny-cuda-nn, JIT fusion off and on: its own C++ programs (benchmarks/upstream_tcnn.py)
// and its Python package tinycudann (tcnn_workloads.py --module tinycudann).
inline const char* const kUpstream = "tcnn";
inline const char* const kUpstreamJit = "tcnn-jit";
inline const char* const kUpstreamPython = "tinycudann";
inline const char* const kUpstreamPythonJit = "tinycudann-jit";
// A variant's suffix where an eikonal step took grad_x f by central differences (six more forward
// passes: the workaround without second derivatives; tcnn_workloads.py --eikonal-gradient fd).
inline const char* const kFiniteDifferenceSuffix = "-fd";

struct WorkloadFigure {
  std::string variant, workload, mode, device;
  int64_t batch = 0;
  std::optional<double> samples_per_s;  // none: `error` says why
  std::string error;
  std::string via;                      // how it was measured ("tinycudann Python", "bench_image_ours", ...)
  std::optional<double> first_loss, last_loss;
  std::string source;                   // the file
};

struct WorkloadFigures {
  std::vector<std::string> sources;
  std::vector<std::string> torch_versions;  // as the files give them
  std::vector<WorkloadFigure> figures;
  // The figure of `variant` for the row (same workload id, mode, batch and device), or null.
  const WorkloadFigure* find(const std::string& variant, const WorkloadRow& row) const;
  // Upstream's figure for the row, JIT fusion on or off: from its C++ programs where they cover
  // the row, else from tinycudann, else (an eikonal row: upstream has no second derivatives)
  // tinycudann's finite-difference workaround (the figure's `variant` says which).
  const WorkloadFigure* upstream(const WorkloadRow& row, bool jit) const;
};

// Throws std::runtime_error naming the file when one cannot be read or has no "results" array.
WorkloadFigures load_workload_figures(const std::vector<std::string>& paths);

}  // namespace tinyfuse::bench
