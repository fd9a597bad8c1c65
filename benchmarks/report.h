// Presenting a benchmark run: a readable table for stdout and a JSON record written atomically.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "host_info.h"
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
  std::vector<int64_t> batches;
  std::optional<PeakResult> peak;  // the CPU's measured sgemm rate (CPU runs only)
  std::vector<CaseResult> results;
};

// Header (tool, BLAS, threads, CPU, date, sgemm peak) and one row per result.
void print_report(std::ostream& os, const Report& r);

// The run as JSON, keys in a fixed reading order (tool, version, date, git, host, ..., results).
ojson to_json(const Report& r);

// Creates the folder `path` will be written to and checks it is writable, so a bad --out fails
// before the measurements instead of after. Throws std::runtime_error naming the folder.
void prepare_output_folder(const std::string& path);

// Writes `text` to `path` through a temporary file in the same folder and a rename, creating the
// folder if needed. Throws std::runtime_error naming the path on failure.
void write_file_atomically(const std::string& path, const std::string& text);

// "3.214 M" style: three significant decimals and an SI prefix.
std::string si(double value);

}  // namespace tinyfuse::bench
