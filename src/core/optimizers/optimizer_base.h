// What every optimizer of every backend shares: a base class with checked, all-or-nothing state
// loading, argument checks for step(), the matrix / non-matrix layout of the parameter buffer,
// and state-header helpers. Device-neutral: the backends derive their own bases from it (adding
// device()), and the wrappers in this folder (ExponentialDecay, Composite) are written once
// against it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/json_text.h"
#include "core/memory_plan.h"
#include "core/optimizer_config.h"
#include "tinyfuse/buffer.h"
#include "tinyfuse/errors.h"
#include "tinyfuse/optimizer.h"

namespace tinyfuse {

// The checked arguments of step(): contiguous arrays of n elements on the optimizer's device.
struct StepArgs {
  float* master = nullptr;
  void* params = nullptr;  // null when the params view is the master buffer itself
  DType params_dtype = DType::F32;
  const void* gradients = nullptr;
  DType gradients_dtype = DType::F32;
  size_t n = 0;
  Stream stream = nullptr;  // master's: where a GPU step queues its work
};

// load_state() checks the whole state (nested optimizers included) before changing anything,
// so a rejected state leaves the optimizer as it was.
class OptimizerBase : public Optimizer {
 public:
  explicit OptimizerBase(std::string path) : path_(std::move(path)) {}

  void load_state(const json& header, const std::vector<float>& data) final {
    check_state(header, data.data(), data.size());
    apply_state(header, data.data());
  }

  // Adds to `plan` what allocate(n_params, ...) will allocate, nested optimizers included: the
  // Trainer checks its whole plan before allocating any of it.
  virtual void plan_memory(MemoryPlan& plan, size_t n_params) const = 0;

  // Number of floats state_data() returns (fixed once allocated).
  virtual size_t state_size() const = 0;
  // Throws Error if (header, data[0, size)) is not a state this optimizer can take.
  virtual void check_state(const json& header, const float* data, size_t size) const = 0;
  // Takes a state check_state() accepted.
  virtual void apply_state(const json& header, const float* data) = 0;

  // "Adam optimizer (optimizer.nested[1])", for messages.
  std::string who() const { return name() + " optimizer" + (path_.empty() ? "" : " (" + path_ + ")"); }
  size_t n_params() const { return n_; }

  [[noreturn]] void state_error(const std::string& what) const {
    throw Error(who() + ": cannot load optimizer state: " + what + "; the optimizer state was left unchanged");
  }

 protected:
  void mark_allocated(size_t n) {
    n_ = n;
    allocated_ = true;
  }
  bool allocated() const { return allocated_; }

  // Throws unless lr is finite and >= 0.
  void check_learning_rate(float lr) const {
    if (!std::isfinite(lr) || lr < 0.0f)
      throw Error(who() + ": set_learning_rate(" + std::to_string(lr) +
                  "): the learning rate must be a finite number >= 0; it was left unchanged");
  }

  // Checks the common fields of a state header: an object of our otype and parameter count, and
  // that `size` floats are what this optimizer stores.
  inline void check_header(const json& header, size_t size) const;

  // Checks that allocate() was called and the arguments of step() fit (ShapeError / Error naming
  // the optimizer); returns them as arrays.
  inline StepArgs begin_step(float loss_scale, const TensorView& master, const TensorView& params,
                             const TensorView& gradients) const;

  const std::string path_;

 private:
  size_t n_ = 0;
  bool allocated_ = false;
};

// ---- state headers -----------------------------------------------------------------------

// Field `key` of a state header as JSON / a finite number / an unsigned integer; Error naming
// `who` otherwise.
inline const json& header_field(const OptimizerBase& who, const json& header, const char* key) {
  if (!header.is_object() || !header.contains(key))
    who.state_error(std::string("the state header has no \"") + key + "\"");
  return header.at(key);
}

inline double header_number(const OptimizerBase& who, const json& header, const char* key) {
  const json& v = header_field(who, header, key);
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    who.state_error(std::string("header field \"") + key + "\" must be a finite number, got " + json_excerpt(v));
  return v.get<double>();
}

inline uint64_t header_uint(const OptimizerBase& who, const json& header, const char* key) {
  const json& v = header_field(who, header, key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    who.state_error(std::string("header field \"") + key + "\" must be an integer >= 0, got " + json_excerpt(v));
  return v.get<uint64_t>();
}

inline void OptimizerBase::check_header(const json& header, size_t size) const {
  if (!allocated()) state_error("allocate() has not been called yet");
  if (!header.is_object()) state_error("the state header must be a JSON object, got " + json_excerpt(header));
  const json& otype = header_field(*this, header, "otype");
  if (!otype.is_string() || otype.get<std::string>() != name())
    state_error("the state is for a " + json_excerpt(otype) + " optimizer, this is a \"" + name() + "\" optimizer");
  const uint64_t n = header_uint(*this, header, "n_params");
  if (n != n_params())
    state_error("the state is for " + std::to_string(n) + " parameters, this optimizer has " +
                std::to_string(n_params()));
  if (size != state_size())
    state_error("the state data has " + std::to_string(size) + " floats, expected " + std::to_string(state_size()));
}

// ---- step() arguments --------------------------------------------------------------------

// The dtypes a backend keeps model weights (params, gradients, inference params) in: f32 or f64
// on the CPU (f64 is its reference mode), f32, f16 or bf16 on GPUs.
inline bool weight_dtype_supported(Device device, DType t) {
  return device == Device::CPU ? t == DType::F32 || t == DType::F64
                               : t == DType::F32 || t == DType::F16 || t == DType::BF16;
}
// Bytes per element of the widest of those dtypes.
inline size_t widest_weight_dtype_size(Device device) { return device == Device::CPU ? 8 : 4; }

// Checks a view of n_params() weights on the optimizer's device: f32 for the master weights,
// a supported weight dtype otherwise; contiguous.
inline void check_weights_view(const OptimizerBase& who, const char* what, const TensorView& v, bool master = false) {
  auto fail = [&](const std::string& why) {
    throw ShapeError(who.who() + ": " + what + ": " + why + "; got " + v.describe());
  };
  const Device device = who.device();
  const size_t n = who.n_params();
  if (v.device != device) fail("must be on the " + std::string(device == Device::CPU ? "CPU" : "GPU (" + to_string(device) + ")"));
  if (master ? v.dtype != DType::F32 : !weight_dtype_supported(device, v.dtype))
    fail(master ? "must be f32" : device == Device::CPU ? "must be f32 or f64 on the CPU" : "must be f32 or f16 on the GPU");
  if (v.numel() != static_cast<int64_t>(n)) fail("must have " + std::to_string(n) + " elements (n_params)");
  if (!v.contiguous()) fail("must be contiguous");
  if (n > 0 && v.data == nullptr) fail("null data pointer");
}

// Checks the arguments of step(); returns true when `params` is the master buffer itself.
inline bool check_step_views(const OptimizerBase& who, float loss_scale, const TensorView& master,
                             const TensorView& params, const TensorView& gradients) {
  if (!std::isfinite(loss_scale) || loss_scale <= 0.0f)
    throw Error(who.who() + ": loss_scale must be a finite number > 0, got " + std::to_string(loss_scale));
  check_weights_view(who, "master", master, true);
  check_weights_view(who, "params", params);
  check_weights_view(who, "gradients", gradients);
  const bool alias = params.data == master.data;
  if (alias && who.n_params() > 0 && params.dtype != DType::F32)
    throw ShapeError(who.who() + ": params (" + params.describe() + ") shares memory with the f32 master weights");
  return alias;
}

inline StepArgs OptimizerBase::begin_step(float loss_scale, const TensorView& master, const TensorView& params,
                                          const TensorView& gradients) const {
  if (!allocated()) throw Error(who() + ": step() called before allocate()");
  const bool alias = check_step_views(*this, loss_scale, master, params, gradients);
  StepArgs a;
  a.n = n_params();
  a.master = static_cast<float*>(master.data);
  a.params_dtype = params.dtype;
  a.params = alias ? nullptr : params.data;
  a.gradients = gradients.data;
  a.gradients_dtype = gradients.dtype;
  a.stream = master.stream;
  return a;
}

// Elements [offset, offset + count) of a contiguous view, as a 1-D view.
inline TensorView sub_vector(const TensorView& v, size_t offset, size_t count) {
  char* base = static_cast<char*>(v.data);
  return TensorView::vector(base ? base + offset * dtype_size(v.dtype) : nullptr, v.dtype, v.device,
                            static_cast<int64_t>(count), v.stream);
}

// Copies one contiguous weights view into another of the same size on the same device (as one
// row, so GPUs do a single linear copy; dtypes may differ). Work goes on dst.stream.
inline void copy_weights(const TensorView& dst, const TensorView& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (dst.device == Device::CPU && src.device == Device::CPU && dst.dtype == src.dtype) {
    std::memcpy(dst.data, src.data, static_cast<size_t>(n) * dtype_size(dst.dtype));
    return;
  }
  copy_tensor(TensorView::matrix(dst.data, dst.dtype, dst.device, 1, n, dst.stream),
              TensorView::matrix(src.data, src.dtype, src.device, 1, n, src.stream));
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
inline std::vector<ParamRun> param_runs(const OptimizerBase& who, size_t n, const std::vector<ParamSegment>& segments) {
  std::vector<std::pair<size_t, size_t>> matrices;
  for (const auto& s : segments) {
    if (s.offset > n || s.count > n - s.offset)
      throw ShapeError(who.who() + ": allocate(): parameter segment [" + std::to_string(s.offset) + ", " +
                       std::to_string(s.offset + s.count) + ") lies outside the " + std::to_string(n) +
                       " parameters");
    if (s.kind == ParamSegment::Kind::Matrix && s.count > 0) matrices.emplace_back(s.offset, s.offset + s.count);
  }
  std::sort(matrices.begin(), matrices.end());
  std::vector<ParamRun> runs;
  size_t pos = 0;
  for (const auto& [b, e] : matrices) {
    if (b > pos) runs.push_back({pos, b, false});
    if (!runs.empty() && runs.back().matrix && runs.back().end >= b)
      runs.back().end = std::max(runs.back().end, e);  // overlapping or adjacent matrices
    else if (e > pos)
      runs.push_back({std::max(b, pos), e, true});
    pos = std::max(pos, e);
  }
  if (pos < n) runs.push_back({pos, n, false});
  return runs;
}

// Calls fn(b, e, matrix) for each part of the runs that lies in [begin, end).
template <typename Fn>
void for_each_run(const std::vector<ParamRun>& runs, size_t begin, size_t end, Fn&& fn) {
  auto it = std::upper_bound(runs.begin(), runs.end(), begin,
                             [](size_t x, const ParamRun& r) { return x < r.end; });
  for (; it != runs.end() && it->begin < end; ++it) fn(std::max(begin, it->begin), std::min(end, it->end), it->matrix);
}

// The segments overlapping [offset, offset + count), clipped to it and rebased to start at 0.
inline std::vector<ParamSegment> slice_segments(const std::vector<ParamSegment>& segments, size_t offset, size_t count) {
  std::vector<ParamSegment> out;
  const size_t end = offset + count;
  for (ParamSegment s : segments) {
    const size_t b = std::max(s.offset, offset), e = std::min(s.offset + s.count, end);
    if (b >= e) continue;
    s.offset = b - offset;
    s.count = e - b;
    out.push_back(s);
  }
  return out;
}

}  // namespace tinyfuse
