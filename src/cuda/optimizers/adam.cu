// Adam on the GPU, with the CPU reference's semantics and arithmetic (cpu/optimizers/adam.cpp):
// a step counter per parameter (non-matrix parameters with a zero gradient are skipped unless
// skip_zero_grad_non_matrix_params is false), l2_reg / non_matrix_l2_reg, optional gradient
// clipping, epsilon added to sqrt(v) before bias correction, optional AdaBound bounds, relative /
// absolute weight decay and weight clipping. One elementwise kernel per step, all
// in float; the per-step constants are computed on the host exactly as the CPU does. This file
// is compiled without FMA contraction so each operation rounds as on the CPU.
#include <cfloat>
#include <cmath>

#include "core/optimizers/adam_state.h"
#include "cuda/common.cuh"
#include "cuda/optimizers/gpu_optimizer.h"
#include "cuda/optimizers/step_types.cuh"
#include "tinyfuse/buffer.h"

namespace tinyfuse::cuda {

namespace {

// Everything one step needs, in the float values the update uses.
struct AdamConsts {
  float loss_scale, lr, non_matrix_factor, beta1, beta2, one_minus_beta1, one_minus_beta2, epsilon, l2_reg;
  float non_matrix_l2_reg, relative_decay, absolute_decay, clipping, gradient_clipping, lower, upper;
  uint32_t step;
  float correction_at_step;  // bias correction for a counter equal to the global step (from the host)
  bool do_matrix, do_other, skip_zero_grad;
};

__device__ __forceinline__ float bias_correction(const AdamConsts& c, uint32_t t) {
  const float tf = static_cast<float>(t);
  return sqrtf(1.0f - powf(c.beta2, tf)) / (1.0f - powf(c.beta1, tf));
}

template <typename P, typename G>
__global__ void adam_kernel(AdamConsts c, int64_t n, const uint8_t* __restrict__ matrix_mask, float* __restrict__ master,
                            P* __restrict__ params, const G* __restrict__ gradients, float* __restrict__ first,
                            float* __restrict__ second, uint32_t* __restrict__ param_steps) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const bool matrix = matrix_mask[i] != 0;
  if (matrix ? !c.do_matrix : !c.do_other) return;
  float g = to_float(gradients[i]) / c.loss_scale;
  if (!matrix && g == 0.0f && c.skip_zero_grad) return;  // untouched non-matrix params keep their state
  const float w = master[i];
  g += (matrix ? c.l2_reg : c.non_matrix_l2_reg) * w;
  if (c.gradient_clipping != 0.0f) g = copysignf(fminf(fabsf(g), c.gradient_clipping), g);
  const float m = c.beta1 * first[i] + c.one_minus_beta1 * g;
  const float v = c.beta2 * second[i] + c.one_minus_beta2 * (g * g);
  first[i] = m;
  second[i] = v;
  const uint32_t t = param_steps[i] + 1;
  param_steps[i] = t;
  float lr = matrix ? c.lr : c.lr * c.non_matrix_factor;
  lr *= t == c.step ? c.correction_at_step : bias_correction(c, t);
  const float rate = fminf(fmaxf(lr / (sqrtf(v) + c.epsilon), c.lower), c.upper);
  const float decayed = (1.0f - c.relative_decay * lr) * w - copysignf(c.absolute_decay * lr, w);
  float new_w = decayed - rate * m;
  if (c.clipping != 0.0f) new_w = fminf(fmaxf(new_w, -c.clipping), c.clipping);
  master[i] = new_w;
  if (params) params[i] = from_float<P>(new_w);
}

class Adam final : public GpuOptimizer {
 public:
  explicit Adam(const OptimizerSpec& spec)
      : GpuOptimizer(spec.path), spec_(spec), lr_(static_cast<float>(spec.adam.learning_rate)) {}

  std::string name() const override { return "Adam"; }
  float learning_rate() const override { return lr_; }
  void set_learning_rate(float lr) override {
    check_learning_rate(lr);
    lr_ = lr;
  }
  uint32_t step_count() const override { return step_; }

  json hyperparams() const override {
    json j = optimizer_spec_json(spec_);
    j["learning_rate"] = tidy_float(lr_);
    return j;
  }

  void plan_memory(MemoryPlan& plan, size_t n) const override {
    plan.add(who() + " moments", n, 2 * sizeof(float), false);
    plan.add(who() + " step counters", n, sizeof(uint32_t), false);
    plan.add(who() + " matrix mask", n, 1, false);
    plan.add(who() + " matrix mask (host staging)", n, 1, true);
  }

  void allocate(size_t n, const std::vector<ParamSegment>& segments) override {
    const std::vector<ParamRun> runs = param_runs(*this, n, segments);
    std::vector<uint8_t> mask(n, 0);
    for (const ParamRun& r : runs)
      if (r.matrix) std::fill(mask.begin() + r.begin, mask.begin() + r.end, uint8_t(1));
    first_ = Buffer(Device::CUDA, n * sizeof(float));
    second_ = Buffer(Device::CUDA, n * sizeof(float));
    param_steps_ = Buffer(Device::CUDA, n * sizeof(uint32_t));
    matrix_mask_ = Buffer(Device::CUDA, n);
    zero(first_.data(), n * sizeof(float));
    zero(second_.data(), n * sizeof(float));
    zero(param_steps_.data(), n * sizeof(uint32_t));
    upload(matrix_mask_.data(), mask.data(), n);
    step_ = 0;
    mark_allocated(n);
  }

  void step(float loss_scale, const TensorView& master, const TensorView& params,
            const TensorView& gradients) override {
    const StepArgs args = begin_step(loss_scale, master, params, gradients);
    ++step_;
    const AdamConsts c = consts(loss_scale);
    if (args.n == 0) return;
    const int64_t n = static_cast<int64_t>(args.n);
    with_gpu_step_types(args, [&](auto* p, const auto* g) {
      adam_kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream_of(args.stream)>>>(
          c, n, static_cast<const uint8_t*>(matrix_mask_.data()), args.master, p, g,
          static_cast<float*>(first_.data()), static_cast<float*>(second_.data()),
          static_cast<uint32_t*>(param_steps_.data()));
    });
    TF_GPU_CHECK_LAUNCH("adam_kernel");
  }

  // ---- state: [first moments | second moments | param steps % 2^16 | param steps / 2^16] ----
  // (the CPU's layout: step counters are split so that every value is exact in a float)

  json state_header() const override { return adam_state::header(name(), n_params(), step_, lr_); }

  size_t state_size() const override { return adam_state::size(n_params()); }

  std::vector<float> state_data() const override {
    const size_t n = n_params();
    std::vector<float> out(state_size());
    std::vector<uint32_t> steps(n);
    download(out.data(), first_.data(), n * sizeof(float));
    download(out.data() + n, second_.data(), n * sizeof(float));
    download(steps.data(), param_steps_.data(), n * sizeof(uint32_t));
    adam_state::pack_steps(steps.data(), n, out.data());
    return out;
  }

  void check_state(const json& header, const float* data, size_t size) const override {
    check_header(header, size);
    adam_state::check_fields(*this, header, data);
  }


  void apply_state(const json& header, const float* data) override {
    const size_t n = n_params();
    std::vector<uint32_t> steps(n);
    adam_state::unpack_steps(data, n, steps.data());
    upload(first_.data(), data, n * sizeof(float));
    upload(second_.data(), data + n, n * sizeof(float));
    upload(param_steps_.data(), steps.data(), n * sizeof(uint32_t));
    step_ = static_cast<uint32_t>(header.at("current_step").get<uint64_t>());
    lr_ = static_cast<float>(header.at("learning_rate").get<double>());
  }

 private:
  static float host_bias_correction(float beta1, float beta2, uint32_t t) {
    const float tf = static_cast<float>(t);
    return std::sqrt(1.0f - std::pow(beta2, tf)) / (1.0f - std::pow(beta1, tf));
  }

  AdamConsts consts(float loss_scale) const {
    const AdamSpec& a = spec_.adam;
    AdamConsts c;
    c.loss_scale = loss_scale;
    c.lr = lr_;
    c.non_matrix_factor = static_cast<float>(a.non_matrix_learning_rate_factor);
    c.beta1 = static_cast<float>(a.beta1);
    c.beta2 = static_cast<float>(a.beta2);
    c.one_minus_beta1 = 1.0f - c.beta1;
    c.one_minus_beta2 = 1.0f - c.beta2;
    c.epsilon = static_cast<float>(a.epsilon);
    c.l2_reg = static_cast<float>(a.l2_reg);
    c.non_matrix_l2_reg = static_cast<float>(a.non_matrix_l2_reg);
    c.relative_decay = static_cast<float>(a.relative_decay);
    c.absolute_decay = static_cast<float>(a.absolute_decay);
    c.clipping = static_cast<float>(a.clipping_magnitude);
    c.gradient_clipping = static_cast<float>(a.gradient_clipping_magnitude);
    c.lower = 0.0f;
    c.upper = FLT_MAX;
    if (a.adabound) {
      // AdaBound's bounds on the per-element rate, tightening with the global step count.
      const float s = static_cast<float>(step_);
      c.lower = 0.1f - 0.1f / (c.one_minus_beta2 * s + 1.0f);
      c.upper = 0.1f + 0.1f / (c.one_minus_beta2 * s);
    }
    c.step = step_;
    c.correction_at_step = host_bias_correction(c.beta1, c.beta2, step_);
    c.do_matrix = a.optimize_matrix_params;
    c.do_other = a.optimize_non_matrix_params;
    c.skip_zero_grad = a.skip_zero_grad_non_matrix_params;
    return c;
  }

  OptimizerSpec spec_;
  float lr_;
  uint32_t step_ = 0;
  Buffer first_, second_, param_steps_, matrix_mask_;
};

}  // namespace

std::unique_ptr<GpuOptimizer> make_adam(const OptimizerSpec& spec) { return std::make_unique<Adam>(spec); }

}  // namespace tinyfuse::cuda
