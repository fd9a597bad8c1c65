// The workload rows as a table (throughput beside PyTorch, tinyfuse.tcnn and upstream tiny-cuda-nn;
// then each row's own limit and checks) and as JSON.
#pragma once

#include <array>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "report.h"
#include "workloads/comparison.h"
#include "workloads/runner.h"
#include "workloads/spec.h"

namespace tinyfuse::bench {

// What a row's limit is computed from (all measured in the same run, or read from the file the
// same device call wrote).
struct WorkloadLimits {
  std::optional<double> copy_bytes_per_s;    // bytes read + written per second
  std::string copy_what;                     // where it comes from
  std::optional<double> matmul_flops_per_s;  // at the precision the networks compute in
  std::string matmul_what;
  // Cache levels a grid table may live in, smallest first ("L2", bytes), ...; past the last: "DRAM".
  std::vector<std::pair<std::string, double>> caches;
};

// A row's limit: the streams it cannot avoid (and the grid's traffic when its table lives in
// DRAM) over the copy rate, the tensor FLOP over the matmul rate; the lower binds.
struct RowLimit {
  std::string grid_level;  // "L2", "L3", "DRAM" or "" (no grid)
  double dram_bytes_per_sample = 0;
  std::optional<double> memory_samples_per_s, compute_samples_per_s;
  std::string binding;  // "memory", "compute" or "" (no ceilings)
  std::optional<double> percent;  // measured samples/s over the binding limit
};
RowLimit row_limit(const WorkloadRow& row, const WorkloadLimits& limits);

struct WorkloadReport {
  const Report* header = nullptr;  // tool, date, host, commit, device, timing plan, GPU
  std::string clock;
  // The machine's load averages (1, 5, 15 minutes) when the rows started and ended.
  std::optional<std::array<double, 3>> load_start, load_end;
  WorkloadLimits limits;
  std::vector<WorkloadSpec> specs;
  std::vector<WorkloadRow> rows;
  WorkloadFigures figures;
};

void print_workload_report(std::ostream& os, const WorkloadReport& r);
ojson workload_report_json(const WorkloadReport& r);

}  // namespace tinyfuse::bench
