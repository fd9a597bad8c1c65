// The one place that chooses FullyFusedMLP's kernels (plan.h): for each pass, the families in
// order of measured speed (docs/PERFORMANCE.md, "Kernel families"), each asked whether it takes
// the call; the first that does runs it. Each family's own rules (shapes, device, shared memory)
// live in its plan_* function, beside its kernel.
#include "cuda/fused/plan.h"

#include <cstdlib>
#include <cstring>

namespace tinyfuse::cuda::fused {

const char* to_string(FusedKernel kernel) {
  switch (kernel) {
    case FusedKernel::None: return "none";
    case FusedKernel::General: return "general";
    case FusedKernel::Pipelined: return "pipelined";
    case FusedKernel::PipelinedFoldedLoss: return "pipelined (folded loss)";
    case FusedKernel::PipelinedWeightGrads: return "pipelined (weight gradients inside)";
    case FusedKernel::PipelinedTrainStep: return "pipelined (one-kernel training step)";
    case FusedKernel::Wgmma: return "hopper wgmma";
    case FusedKernel::WgmmaTma: return "hopper wgmma (TMA)";
    case FusedKernel::WgmmaOneBlob: return "hopper wgmma (OneBlob inside)";
    case FusedKernel::GeneralSecondOrder: return "general (second order)";
  }
  return "?";
}

const char* to_string(FusedPass pass) {
  switch (pass) {
    case FusedPass::Inference: return "inference";
    case FusedPass::TrainingForward: return "training forward";
    case FusedPass::ForwardWithLoss: return "training forward with the loss";
    case FusedPass::Backward: return "backward";
    case FusedPass::BackwardWeightGrads: return "backward with weight gradients";
    case FusedPass::TrainStep: return "training step";
    case FusedPass::SecondOrder: return "second derivatives";
    case FusedPass::EncodedInference: return "inference behind OneBlob";
  }
  return "?";
}

#if !defined(TINYFUSE_WITH_HIP)
namespace {

// TINYFUSE_FUSED_KERNELS=general: the general kernels only, for every network (read once).
bool general_only_from_environment() {
  static const bool general = [] {
    const char* e = std::getenv("TINYFUSE_FUSED_KERNELS");
    return e && std::strcmp(e, "general") == 0;
  }();
  return general;
}

}  // namespace
#endif

FusedPlan plan_pass(const PlanInputs& in) {
#if defined(TINYFUSE_WITH_HIP)
  // HIP builds have the general kernels only (the others are PTX).
  if (in.pass == FusedPass::Inference || in.pass == FusedPass::TrainingForward) return plan_general_forward(in);
  if (in.pass == FusedPass::Backward) return plan_general_backward(in);
  return FusedPlan{};
#else
  const FusedKernelOptions& o = in.options;
  const bool pipelined = o.pipelined && !general_only_from_environment();
  FusedPlan p;
  switch (in.pass) {
    case FusedPass::Inference:
      if (pipelined && o.hopper && (p = plan_hopper_inference(in)).kernel != FusedKernel::None) return p;
      if (pipelined && (p = plan_pipelined_inference(in)).kernel != FusedKernel::None) return p;
      return plan_general_forward(in);
    case FusedPass::TrainingForward:
      if (pipelined && (p = plan_pipelined_training_forward(in)).kernel != FusedKernel::None) return p;
      return plan_general_forward(in);
    case FusedPass::ForwardWithLoss:
      if (pipelined && o.folded_loss) return plan_pipelined_training_forward(in);
      return p;
    case FusedPass::Backward:
      if (pipelined && (p = plan_pipelined_backward(in)).kernel != FusedKernel::None) return p;
      return plan_general_backward(in);
    case FusedPass::BackwardWeightGrads:
      if (pipelined && o.fused_weight_grads) return plan_pipelined_weight_grads(in);
      return p;
    case FusedPass::TrainStep:
      // It folds the loss and forms the weight gradients inside: either switch off rules it out.
      if (pipelined && o.one_kernel_step && o.folded_loss && o.fused_weight_grads) return plan_pipelined_train_step(in);
      return p;
    case FusedPass::SecondOrder:
      // A general-family kernel (mma.sync, sm_75+): TINYFUSE_FUSED_KERNELS=general keeps it.
      if (o.fused_second_order) return plan_general_second_order(in);
      return p;
    case FusedPass::EncodedInference:
      // From OneBlob's positions: the one kernel, or none (OneBlob's kernel, then an Inference plan).
      if (pipelined && o.hopper && o.encoding_inference) return plan_hopper_oneblob_inference(in);
      return p;
  }
  return p;
#endif
}

}  // namespace tinyfuse::cuda::fused
