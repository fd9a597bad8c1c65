#include "cpu/optimizers/cpu_optimizer.h"

#include <cmath>

#include "tinyfuse/errors.h"

namespace tinyfuse::cpu {

// ---- CpuOptimizer ------------------------------------------------------------------------

void CpuOptimizer::load_state(const json& header, const std::vector<float>& data) {
  check_state(header, data.data(), data.size());
  apply_state(header, data.data());
}

std::string CpuOptimizer::who() const {
  return name() + " optimizer" + (path_.empty() ? "" : " (" + path_ + ")");
}

void CpuOptimizer::check_learning_rate(float lr) const {
  if (!std::isfinite(lr) || lr < 0.0f)
    throw Error(who() + ": set_learning_rate(" + std::to_string(lr) +
                "): the learning rate must be a finite number >= 0; it was left unchanged");
}

void CpuOptimizer::state_error(const std::string& what) const {
  throw Error(who() + ": cannot load optimizer state: " + what + "; the optimizer state was left unchanged");
}

void CpuOptimizer::check_header(const json& header, size_t size) const {
  if (!allocated()) state_error("allocate() has not been called yet");
  if (!header.is_object()) state_error("the state header must be a JSON object, got " + header.dump());
  const json& otype = header_field(*this, header, "otype");
  if (!otype.is_string() || otype.get<std::string>() != name())
    state_error("the state is for a " + otype.dump() + " optimizer, this is a \"" + name() + "\" optimizer");
  const uint64_t n = header_uint(*this, header, "n_params");
  if (n != n_params())
    state_error("the state is for " + std::to_string(n) + " parameters, this optimizer has " +
                std::to_string(n_params()));
  if (size != state_size())
    state_error("the state data has " + std::to_string(size) + " floats, expected " + std::to_string(state_size()));
}

// ---- step() arguments --------------------------------------------------------------------

namespace {

void check_view(const CpuOptimizer& who, const char* what, const TensorView& v, size_t n, bool master) {
  auto fail = [&](const std::string& why) {
    throw ShapeError(who.who() + ": " + what + ": " + why + "; got " + v.describe());
  };
  if (v.device != Device::CPU) fail("must be on the CPU");
  if (master ? v.dtype != DType::F32 : (v.dtype != DType::F32 && v.dtype != DType::F64))
    fail(master ? "must be f32" : "must be f32 or f64 on the CPU");
  if (v.numel() != static_cast<int64_t>(n)) fail("must have " + std::to_string(n) + " elements (n_params)");
  if (!v.contiguous()) fail("must be contiguous");
  if (n > 0 && v.data == nullptr) fail("null data pointer");
}

}  // namespace

StepArgs check_step_args(const CpuOptimizer& who, float loss_scale, const TensorView& master,
                         const TensorView& params, const TensorView& gradients) {
  if (!std::isfinite(loss_scale) || loss_scale <= 0.0f)
    throw Error(who.who() + ": loss_scale must be a finite number > 0, got " + std::to_string(loss_scale));
  const size_t n = who.n_params();
  check_view(who, "master", master, n, true);
  check_view(who, "params", params, n, false);
  check_view(who, "gradients", gradients, n, false);
  StepArgs a;
  a.n = n;
  a.master = static_cast<float*>(master.data);
  a.params_dtype = params.dtype;
  a.params = params.data == master.data ? nullptr : params.data;
  if (!a.params && n > 0 && params.dtype != DType::F32)
    throw ShapeError(who.who() + ": params (" + params.describe() + ") shares memory with the f32 master weights");
  a.gradients = gradients.data;
  a.gradients_dtype = gradients.dtype;
  return a;
}

void check_output_view(const CpuOptimizer& who, const char* what, const TensorView& v) {
  check_view(who, what, v, who.n_params(), false);
}

TensorView sub_vector(const TensorView& v, size_t offset, size_t count) {
  char* base = static_cast<char*>(v.data);
  return TensorView::vector(base ? base + offset * dtype_size(v.dtype) : nullptr, v.dtype, v.device,
                            static_cast<int64_t>(count), v.stream);
}

// ---- parameter layout --------------------------------------------------------------------

std::vector<ParamRun> param_runs(const CpuOptimizer& who, size_t n, const std::vector<ParamSegment>& segments) {
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

std::vector<ParamSegment> slice_segments(const std::vector<ParamSegment>& segments, size_t offset, size_t count) {
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

// ---- state headers -----------------------------------------------------------------------

const json& header_field(const CpuOptimizer& who, const json& header, const char* key) {
  if (!header.is_object() || !header.contains(key))
    throw Error(who.who() + ": cannot load optimizer state: the state header has no \"" + key +
                "\"; the optimizer state was left unchanged");
  return header.at(key);
}

double header_number(const CpuOptimizer& who, const json& header, const char* key) {
  const json& v = header_field(who, header, key);
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    throw Error(who.who() + ": cannot load optimizer state: header field \"" + key + "\" must be a finite number, got " +
                v.dump() + "; the optimizer state was left unchanged");
  return v.get<double>();
}

uint64_t header_uint(const CpuOptimizer& who, const json& header, const char* key) {
  const json& v = header_field(who, header, key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    throw Error(who.who() + ": cannot load optimizer state: header field \"" + key +
                "\" must be an integer >= 0, got " + v.dump() + "; the optimizer state was left unchanged");
  return v.get<uint64_t>();
}

}  // namespace tinyfuse::cpu
