// FullyFusedMLP inference through the pipelined kernel (pipelined/forward_kernel.cuh, KEEP =
// false): input in, output out, nothing else touches memory. Its own unit so that it compiles
// beside pipelined/training_forward.cu.
#include "cuda/fused/pipelined/forward_kernel.cuh"

namespace tinyfuse::cuda::fused {

FusedPlan plan_pipelined_inference(const PlanInputs& in) { return plan_pipelined<false>(in); }

}  // namespace tinyfuse::cuda::fused
