// Adam on the GPU: the per-element update, one elementwise kernel per step, all in float, with
// the CPU reference's arithmetic (cpu/optimizers/adam.cpp); core/optimizers/adam.h has the host
// half (the per-step constants, computed on the host as for the CPU) and the semantics. This file
// is compiled without FMA contraction so each operation rounds as on the CPU.
#include <algorithm>
#include <vector>

#include "core/optimizers/adam.h"
#include "cuda/common.cuh"
#include "cuda/optimizers/gpu_optimizer.h"
#include "cuda/optimizers/step_types.cuh"
#include "tinyfuse/buffer.h"

namespace tinyfuse::cuda {

namespace {

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
  store_weight(master, params, i, new_w);
}

class Adam final : public AdamOptimizer<GpuOptimizer> {
 public:
  using AdamOptimizer<GpuOptimizer>::AdamOptimizer;

  // The moments and step counters (AdamOptimizer's plan), then which elements are matrix parameters.
  void plan_memory(MemoryPlan& plan, size_t n) const override {
    AdamOptimizer<GpuOptimizer>::plan_memory(plan, n);
    plan.add(who() + " matrix mask", n, 1, false);
    plan.add(who() + " matrix mask (host staging)", n, 1, true);
  }

 private:
  void allocate_state(size_t n, const std::vector<ParamRun>& runs) override {
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
  }

  void update_elements(const StepArgs& args, const AdamConsts& c) override {
    launch_step(args, [&](int64_t n, auto* p, const auto* g) {
      adam_kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream_of(args.stream)>>>(
          c, n, static_cast<const uint8_t*>(matrix_mask_.data()), args.master, p, g,
          static_cast<float*>(first_.data()), static_cast<float*>(second_.data()),
          static_cast<uint32_t*>(param_steps_.data()));
      TF_GPU_CHECK_LAUNCH("adam_kernel");
    });
  }

  void read_moments(float* first, float* second, uint32_t* steps) const override {
    const size_t n = n_params();
    download(first, first_.data(), n * sizeof(float));
    download(second, second_.data(), n * sizeof(float));
    download(steps, param_steps_.data(), n * sizeof(uint32_t));
  }

  void write_moments(const float* first, const float* second, const uint32_t* steps) override {
    const size_t n = n_params();
    upload(first_.data(), first, n * sizeof(float));
    upload(second_.data(), second, n * sizeof(float));
    upload(param_steps_.data(), steps, n * sizeof(uint32_t));
  }

  Buffer first_, second_, param_steps_, matrix_mask_;
};

}  // namespace

std::unique_ptr<GpuOptimizer> make_adam(const OptimizerSpec& spec) { return std::make_unique<Adam>(spec); }

}  // namespace tinyfuse::cuda
