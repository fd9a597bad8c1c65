// Entry points of FullyFusedMLP's streaming forward kernel (CUDA, sm_80 and newer): the forward
// pass of fused_forward_kernel rebuilt for memory bandwidth, as Width64FusedMLP's kernel is. See
// stream_kernel.cuh for how it works. CUDA builds only (HIP compiles neither unit).
#pragma once

#include "cuda/fused/launch.h"

namespace tinyfuse::cuda::fused {

// Both run the streaming kernel and return true when it applies: a CUDA device of sm_80 or newer,
// input and output at most kStreamMaxIoWidth wide, every layer's weights plus the per-warp stage
// buffers in one block's shared memory. They return false, launching nothing, otherwise; the
// caller then runs fused_forward_kernel, which computes the same values bit for bit.
constexpr int kStreamMaxIoWidth = 256;

// Inference: args with an output and nothing kept for backward (stream_inference.cu).
bool launch_stream_inference(DType t, const FusedShape& shape, const ForwardArgs& args, gpuStream_t stream);

// Training forward: args with hidden_y, and hidden_z / out_z exactly where hidden_keeps_z /
// output_keeps_z say (the output may be null); kept matrices 16-byte aligned (stream_forward.cu).
bool launch_stream_forward(DType t, const FusedShape& shape, const ForwardArgs& args, gpuStream_t stream);
// Whether launch_stream_forward evaluates this loss (its kind, the width, the target's and the
// gradients' layout) and this device runs its training forward; launch_stream_forward also asks.
bool stream_forward_takes_loss(const FusedShape& shape, const ForwardArgs::Loss& loss);

// Backward (stream_backward.cu, stream_backward_kernel.cuh): every dZ and dL/dinput that
// fused_backward_kernel writes, bit for bit, where it applies (sm_80+, input and output at most
// kStreamMaxIoWidth wide, the weights and per-warp buffers in one block's shared memory, 16-byte
// aligned matrices); false, launching nothing, otherwise.
bool launch_stream_backward(DType t, const FusedShape& shape, const BackwardArgs& args, gpuStream_t stream);

// Backward with the weight gradients formed inside (stream_backward_wgrad.cu,
// stream_backward_wgrad_kernel.cuh): dZ of every layer as launch_stream_backward forms it, but
// kept in the kernel; each block writes one FP32 partial of every layer's dW into `partial`, in
// launch_weight_grad_reduce's layout. Returns the number of blocks (the reduction's chunk
// count), or 0, launching nothing, where it does not apply: the fused_weight_grads() switch off,
// ForwardPath::General, a shape other than 64 wide with ReLU hidden layers, identity output,
// input 32 or 64 and output at most 64 wide and 1-3 hidden layers, dL/dinput or dz requested, a
// device older than sm_80, unaligned matrices. args.input / ld_in must be set.
// fused_weight_grad_partial_floats: the floats `partial` needs (0 where the shape or dtype rules it out).
size_t fused_weight_grad_partial_floats(DType t, const FusedShape& shape, int64_t batch);
int64_t launch_backward_fused_weight_grads(DType t, const FusedShape& shape, const BackwardArgs& args, float* partial,
                                           gpuStream_t stream);

// The Trainer's whole pass in one kernel (stream_train.cu, stream_train_kernel.cuh): the training
// forward with the L2 loss folded in (as launch_forward_with_loss) and the backward with the
// weight gradients formed inside (as launch_backward_fused_weight_grads), one tile after the
// other on chip; nothing but the loss values (args.loss.values) and one FP32 partial of every
// layer's dW per block (`partial`, launch_weight_grad_reduce's layout) leaves it. args: batch,
// input / ld_in, weights and loss (target, values, scale, n, dims; loss.gradients is not used).
// Returns the number of blocks (the reduction's chunk count), or 0, launching nothing, where it
// does not apply: fused_train_step(), fused_loss() or fused_weight_grads() off, ForwardPath::General, a shape other than
// launch_backward_fused_weight_grads' with 1 or 2 hidden layers, a device older than sm_90 or
// a build without sm_90 code, unaligned input, a loss other than the folded L2. fused_train_partial_floats:
// the floats `partial` needs for these args (0 where launch_fused_train_step would launch nothing,
// so that nothing is allocated for it then).
size_t fused_train_partial_floats(DType t, const FusedShape& shape, const ForwardArgs& args);
int64_t launch_fused_train_step(DType t, const FusedShape& shape, const ForwardArgs& args, float* partial,
                                gpuStream_t stream);

// Inference through the Hopper kernel (wgmma_inference.cu, wgmma_kernel.cuh): hidden width 64 or
// 128, FP16 or BF16, on a compute capability 9.0 device in a build with sm_90a code; false,
// launching nothing, otherwise. Same rounding points as the kernels above, and on the H200 the
// same bits (test_fused_wgmma.cpp requires it).
bool launch_wgmma_inference(DType t, const FusedShape& shape, const ForwardArgs& args, gpuStream_t stream);
// Whether this build holds the Hopper kernel (CMake built wgmma_inference.cu for sm_90a).
bool wgmma_inference_built();

}  // namespace tinyfuse::cuda::fused
