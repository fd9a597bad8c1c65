// FullyFusedMLP's streaming inference kernel (CUDA, sm_80 and newer): the inference path of
// fused_forward_kernel rebuilt for memory bandwidth, as Width64FusedMLP's kernel is. See
// stream_inference.cu for how it works.
#pragma once

#include "cuda/fused/launch.h"

namespace tinyfuse::cuda::fused {

// Runs inference (args with an output and nothing kept for backward) through the streaming
// kernel and returns true when it applies: a CUDA device of sm_80 or newer, input and output at
// most kStreamMaxIoWidth wide, every layer's weights plus the per-warp stage buffers in one
// block's shared memory. Returns false, launching nothing, otherwise; the caller then runs
// fused_forward_kernel, which computes the same values bit for bit.
constexpr int kStreamMaxIoWidth = 256;
bool launch_stream_inference(DType t, const FusedShape& shape, const ForwardArgs& args, gpuStream_t stream);

}  // namespace tinyfuse::cuda::fused
