// What the CPU optimizers share: a base class with checked state loading, argument checks for
// step(), the matrix / non-matrix layout of the parameter buffer, and state-header helpers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/optimizer_config.h"
#include "tinyfuse/optimizer.h"

namespace tinyfuse::cpu {

// Elements per chunk of the elementwise updates.
constexpr int64_t kOptimizerGrain = 1 << 14;

// Base of every CPU optimizer. load_state() checks the whole state (nested optimizers included)
// before changing anything, so a rejected state leaves the optimizer as it was.
class CpuOptimizer : public Optimizer {
 public:
  explicit CpuOptimizer(std::string path) : path_(std::move(path)) {}
  Device device() const override { return Device::CPU; }
  void load_state(const json& header, const std::vector<float>& data) final;

  // Number of floats state_data() returns (fixed once allocated).
  virtual size_t state_size() const = 0;
  // Throws Error if (header, data[0, size)) is not a state this optimizer can take.
  virtual void check_state(const json& header, const float* data, size_t size) const = 0;
  // Takes a state check_state() accepted.
  virtual void apply_state(const json& header, const float* data) = 0;

  // "Adam optimizer (optimizer.nested[1])", for messages.
  std::string who() const;
  size_t n_params() const { return n_; }

 protected:
  void mark_allocated(size_t n) {
    n_ = n;
    allocated_ = true;
  }
  bool allocated() const { return allocated_; }
  // Throws unless lr is finite and >= 0.
  void check_learning_rate(float lr) const;
  // Checks the common fields of a state header: an object of our otype and parameter count, and
  // that `size` floats are what this optimizer stores.
  void check_header(const json& header, size_t size) const;
  [[noreturn]] void state_error(const std::string& what) const;

  const std::string path_;

 private:
  size_t n_ = 0;
  bool allocated_ = false;
};

std::unique_ptr<CpuOptimizer> make_cpu_optimizer(const OptimizerSpec& spec);
std::unique_ptr<CpuOptimizer> make_adam(const OptimizerSpec& spec);
std::unique_ptr<CpuOptimizer> make_sgd(const OptimizerSpec& spec);
std::unique_ptr<CpuOptimizer> make_exponential_decay(const OptimizerSpec& spec);
std::unique_ptr<CpuOptimizer> make_ema(const OptimizerSpec& spec);
std::unique_ptr<CpuOptimizer> make_composite(const OptimizerSpec& spec);

// ---- step() arguments --------------------------------------------------------------------

// The checked arguments of step(): contiguous CPU arrays of n elements.
struct StepArgs {
  float* master = nullptr;
  void* params = nullptr;  // null when the params view is the master buffer itself
  DType params_dtype = DType::F32;
  const void* gradients = nullptr;
  DType gradients_dtype = DType::F32;
  size_t n = 0;
};

// Throws ShapeError / Error naming `who` when the views or loss_scale do not fit.
StepArgs check_step_args(const CpuOptimizer& who, float loss_scale, const TensorView& master,
                         const TensorView& params, const TensorView& gradients);
// Checks a view the optimizer writes n model-dtype values into (f32 or f64, contiguous, CPU).
void check_output_view(const CpuOptimizer& who, const char* what, const TensorView& v);

// Elements [offset, offset + count) of a contiguous view, as a 1-D view.
TensorView sub_vector(const TensorView& v, size_t offset, size_t count);

// Calls fn(P* params, const G* gradients) with the arguments' element types; params is a null
// float* when they alias the master weights.
template <typename Fn>
void with_step_types(const StepArgs& a, Fn&& fn) {
  auto with_params = [&](const auto* g) {
    if (a.params_dtype == DType::F64)
      fn(static_cast<double*>(a.params), g);
    else
      fn(static_cast<float*>(a.params), g);
  };
  if (a.gradients_dtype == DType::F64)
    with_params(static_cast<const double*>(a.gradients));
  else
    with_params(static_cast<const float*>(a.gradients));
}

// ---- parameter layout --------------------------------------------------------------------

// A run [begin, end) of elements that are all matrix or all non-matrix parameters.
struct ParamRun {
  size_t begin = 0, end = 0;
  bool matrix = false;
};

// Runs covering [0, n) in order: elements inside Matrix segments are matrix parameters, every
// other element (Vector, Grid, or in no segment) is not. Throws ShapeError for a segment that
// does not fit in [0, n).
std::vector<ParamRun> param_runs(const CpuOptimizer& who, size_t n, const std::vector<ParamSegment>& segments);

// Calls fn(b, e, matrix) for each part of the runs that lies in [begin, end).
template <typename Fn>
void for_each_run(const std::vector<ParamRun>& runs, size_t begin, size_t end, Fn&& fn) {
  auto it = std::upper_bound(runs.begin(), runs.end(), begin,
                             [](size_t x, const ParamRun& r) { return x < r.end; });
  for (; it != runs.end() && it->begin < end; ++it) fn(std::max(begin, it->begin), std::min(end, it->end), it->matrix);
}

// The segments overlapping [offset, offset + count), clipped to it and rebased to start at 0.
std::vector<ParamSegment> slice_segments(const std::vector<ParamSegment>& segments, size_t offset, size_t count);

// ---- state headers -----------------------------------------------------------------------

// Field `key` of a state header as a number / unsigned integer; Error naming `who` otherwise.
double header_number(const CpuOptimizer& who, const json& header, const char* key);
uint64_t header_uint(const CpuOptimizer& who, const json& header, const char* key);
const json& header_field(const CpuOptimizer& who, const json& header, const char* key);

}  // namespace tinyfuse::cpu
