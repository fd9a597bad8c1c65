#include "cpu/optimizers/cpu_optimizer.h"

#include "tinyfuse/errors.h"

namespace tinyfuse::cpu {

StepArgs check_step_args(const CpuOptimizer& who, float loss_scale, const TensorView& master,
                         const TensorView& params, const TensorView& gradients) {
  const bool alias = check_step_views(who, loss_scale, master, params, gradients);
  StepArgs a;
  a.n = who.n_params();
  a.master = static_cast<float*>(master.data);
  a.params_dtype = params.dtype;
  a.params = alias ? nullptr : params.data;
  a.gradients = gradients.data;
  a.gradients_dtype = gradients.dtype;
  return a;
}

void check_output_view(const CpuOptimizer& who, const char* what, const TensorView& v) {
  check_weights_view(who, what, v);
}

}  // namespace tinyfuse::cpu
