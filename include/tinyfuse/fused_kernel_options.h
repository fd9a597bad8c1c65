// Which FullyFusedMLP kernels may run (a field of BuildOptions, factory.h).
#pragma once

namespace tinyfuse {

// FullyFusedMLP on CUDA: the kernel families its planner may choose from (all by default; it
// takes the fastest that applies: docs/ARCHITECTURE.md lists them). Tests and benchmarks compare
// kernels by leaving some out. Every choice computes the same values bit for bit, except the
// weight-gradient sums of fused_weight_grads and one_kernel_step, which run in another fixed
// order and agree to FP32 rounding. TINYFUSE_FUSED_KERNELS=general in the environment leaves
// every network on the general kernels, whatever these say (to rule the others out).
struct FusedKernelOptions {
  bool hopper = true;              // warpgroup (wgmma) inference on sm_90
  bool tma = true;                 //   with whole tiles moved by tensor copies where the rows allow
  bool pipelined = true;           // the pipelined kernels (false: the general kernels only)
  bool folded_loss = true;         // L2, RelativeL2 and L1 evaluated inside the training forward
  bool fused_weight_grads = true;  // the backward forming the weight gradients itself
  bool one_kernel_step = true;     // the whole training pass in one kernel
  // Second derivatives (backward_backward_input) through one kernel with FP16/BF16 products and
  // the weight-gradient kernels; false: an FP32 network recomputed from the parameters and the
  // portable FP32 sweeps (slower, FP32 throughout; the two agree to FP16 rounding).
  bool fused_second_order = true;
  // Inference behind OneBlob (NetworkWithInputEncoding; FP16, sm_90) in one kernel that makes the
  // features in shared memory as the first layer's input; false: OneBlob's kernel writes them,
  // then the network's inference reads them. Same bits.
  bool encoding_inference = true;
};

}  // namespace tinyfuse
