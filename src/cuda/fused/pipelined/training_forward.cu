// FullyFusedMLP's training forward through the pipelined kernel (pipelined/forward_kernel.cuh,
// KEEP = true): besides the output (or, with the loss folded in, the loss's gradients and per-row
// values in its place), every hidden layer's y, z where hidden_keeps_z and the output layer's z
// where output_keeps_z, bit for bit what fused_forward_kernel writes, so backward() cannot tell
// which kernel made its context. Its own unit so that it compiles beside pipelined/inference.cu.
// sm_90+ only (pipelined/forward_kernel.cuh says why); below, training runs fused_forward_kernel.
#include "cuda/fused/pipelined/forward_kernel.cuh"

namespace tinyfuse::cuda::fused {

namespace {

// What loss_epilogue takes: a loss it folds (is_folded_loss), at most 64 wide, a target of 1 to
// out_width columns. (The network hands it only gradients it can write in place and a target
// whose 16-byte loads are aligned where it asks for them.)
bool loss_applies(const PlanInputs& in) {
  if (!is_folded_loss(in.layout.loss_kind)) return false;
  // At 128 wide the training forward runs at its register cap (254 of 255): with the loss folded
  // the step measured 308 M samples/s at 2^20 against 446 M with the loss kernel (H200,
  // docs/PERFORMANCE.md), so 128 wide keeps the loss kernel.
  if (in.shape.width > 64) return false;
  return in.layout.loss_dims >= 1 && in.layout.loss_dims <= in.shape.out_width;
}

}  // namespace

FusedPlan plan_pipelined_training_forward(const PlanInputs& in) {
  const bool with_loss = in.pass == FusedPass::ForwardWithLoss;
  if (with_loss && !loss_applies(in)) return {};
  if (in.device->major * 100 + in.device->minor * 10 < kPipelinedKeepMinArch) return {};  // see the kernel
  FusedPlan p = plan_pipelined<true>(in);
  if (with_loss && p.kernel != FusedKernel::None) p.kernel = FusedKernel::PipelinedFoldedLoss;
  return p;
}

}  // namespace tinyfuse::cuda::fused
