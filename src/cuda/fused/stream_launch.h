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

}  // namespace tinyfuse::cuda::fused
