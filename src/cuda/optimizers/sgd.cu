// SGD on the GPU: the per-element update in float, without FMA contraction, as the CPU reference
// computes it (cpu/optimizers/sgd.cpp); core/optimizers/sgd.h has the host half and the semantics.
#include "core/optimizers/sgd.h"
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
  store_weight(master, params, i, new_w);
}

class Sgd final : public SgdOptimizer<GpuOptimizer> {
 public:
  using SgdOptimizer<GpuOptimizer>::SgdOptimizer;

 private:
  void update_elements(const StepArgs& args, float loss_scale, float lr, float l2) override {
    launch_step(args, [&](int64_t n, auto* p, const auto* g) {
      sgd_kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream_of(args.stream)>>>(n, loss_scale, lr, l2, args.master, p, g);
      TF_GPU_CHECK_LAUNCH("sgd_kernel");
    });
  }
};

}  // namespace

std::unique_ptr<GpuOptimizer> make_sgd(const OptimizerSpec& spec) { return std::make_unique<Sgd>(spec); }

}  // namespace tinyfuse::cuda
