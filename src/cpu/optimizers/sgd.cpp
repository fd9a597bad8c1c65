// SGD on the CPU: the per-element update (core/optimizers/sgd.h has the host half and the
// semantics). Arithmetic in float, as on the GPU.
#include <type_traits>

#include "core/optimizers/sgd.h"
#include "cpu/optimizers/cpu_optimizer.h"
#include "cpu/parallel.h"

namespace tinyfuse::cpu {

namespace {

class Sgd final : public SgdOptimizer<CpuOptimizer> {
 public:
  using SgdOptimizer<CpuOptimizer>::SgdOptimizer;

 private:
  void update_elements(const StepArgs& args, float loss_scale, float lr, float l2) override {
    with_step_types(args, [&](auto* p, const auto* g) {
      using P = std::remove_pointer_t<decltype(p)>;
      float* w = args.master;
      parallel_for(static_cast<int64_t>(args.n), kOptimizerGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const float grad = static_cast<float>(g[i]) / loss_scale + l2 * w[i];
          const float new_w = w[i] - lr * grad;
          w[i] = new_w;
          if (p) p[i] = static_cast<P>(new_w);
        }
      });
    });
  }
};

}  // namespace

std::unique_ptr<CpuOptimizer> make_sgd(const OptimizerSpec& spec) { return std::make_unique<Sgd>(spec); }

}  // namespace tinyfuse::cpu
