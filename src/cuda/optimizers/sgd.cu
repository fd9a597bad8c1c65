// Plain SGD on the GPU with the CPU reference's semantics (cpu/optimizers/sgd.cpp): every
// parameter takes w -= learning_rate * (g + l2_reg * w), in float, without FMA contraction.
#include <cfloat>
#include <cmath>

#include "cuda/common.cuh"
#include "cuda/optimizers/gpu_optimizer.h"
#include "cuda/optimizers/step_types.cuh"

namespace tinyfuse::cuda {

namespace {

template <typename P, typename G>
__global__ void sgd_kernel(int64_t n, float loss_scale, float lr, float l2, float* __restrict__ master,
                           P* __restrict__ params, const G* __restrict__ gradients) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float w = master[i];
  const float grad = to_float(gradients[i]) / loss_scale + l2 * w;
  const float new_w = w - lr * grad;
  master[i] = new_w;
  if (params) params[i] = from_float<P>(new_w);
}

class Sgd final : public GpuOptimizer {
 public:
  explicit Sgd(const OptimizerSpec& spec)
      : GpuOptimizer(spec.path), spec_(spec), lr_(static_cast<float>(spec.sgd.learning_rate)) {}

  std::string name() const override { return "SGD"; }
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

  void plan_memory(MemoryPlan&, size_t) const override {}  // no state

  void allocate(size_t n, const std::vector<ParamSegment>& segments) override {
    (void)param_runs(*this, n, segments);  // only to reject segments that do not fit
    step_ = 0;
    mark_allocated(n);
  }

  void step(float loss_scale, const TensorView& master, const TensorView& params,
            const TensorView& gradients) override {
    const StepArgs args = begin_step(loss_scale, master, params, gradients);
    ++step_;
    if (args.n == 0) return;
    const int64_t n = static_cast<int64_t>(args.n);
    const float lr = lr_, l2 = static_cast<float>(spec_.sgd.l2_reg);
    with_gpu_step_types(args, [&](auto* p, const auto* g) {
      sgd_kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream_of(args.stream)>>>(n, loss_scale, lr, l2, args.master, p, g);
    });
    TF_GPU_CHECK_LAUNCH("sgd_kernel");
  }

  // State: the step counter and learning rate (in the header); no per-parameter data.
  json state_header() const override {
    return {{"otype", name()}, {"n_params", n_params()}, {"current_step", step_}, {"learning_rate", tidy_float(lr_)}};
  }
  size_t state_size() const override { return 0; }
  std::vector<float> state_data() const override { return {}; }

  void check_state(const json& header, const float*, size_t size) const override {
    check_header(header, size);
    if (header_uint(*this, header, "current_step") > UINT32_MAX) state_error("current_step does not fit 32 bits");
    const double lr = header_number(*this, header, "learning_rate");
    if (lr < 0 || lr > FLT_MAX) state_error("learning_rate " + std::to_string(lr) + " is not a float >= 0");
  }

  void apply_state(const json& header, const float*) override {
    step_ = static_cast<uint32_t>(header.at("current_step").get<uint64_t>());
    lr_ = static_cast<float>(header.at("learning_rate").get<double>());
  }

 private:
  OptimizerSpec spec_;
  float lr_;
  uint32_t step_ = 0;
};

}  // namespace

std::unique_ptr<GpuOptimizer> make_sgd(const OptimizerSpec& spec) { return std::make_unique<Sgd>(spec); }

}  // namespace tinyfuse::cuda
