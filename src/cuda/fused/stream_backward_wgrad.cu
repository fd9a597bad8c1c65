// FullyFusedMLP's backward with the weight gradients inside the streaming kernel
// (stream_backward_wgrad_kernel.cuh): dZ never leaves the kernel; each block writes one FP32
// partial per layer, which launch_weight_grad_reduce adds up. The backward tries it first when
// parameter gradients are wanted; 0 means it does not apply and the two-step path runs.
#include "cuda/fused/forward_choice.h"
#include "cuda/fused/stream_backward_wgrad_kernel.cuh"

namespace tinyfuse::cuda::fused {

namespace {

// The shapes the kernel is written for (its header says why these).
bool shape_applies(const FusedShape& shape) {
  return shape.width == kDwWidth && shape.act == Activation::ReLU && shape.out_act == Activation::None &&
         (shape.in_width == 32 || shape.in_width == 64) && shape.out_width % 16 == 0 && shape.out_width <= kDwWidth &&
         shape.n_hidden >= 1 && shape.n_hidden + 1 <= kDwMaxLayers;
}

struct DwPlan {
  size_t weight_bytes, smem;
  int stage_stride;
};

DwPlan dw_plan(const FusedShape& shape) {
  const SmemPlan weights = plan_smem(shape, 2, static_cast<size_t>(-1));  // every layer resident
  DwPlan p;
  p.weight_bytes = (weights.bytes + 15) / 16 * 16;
  p.stage_stride = (kDwWidth + kSmemPad) * 2;  // in and out are at most 64 wide
  p.smem = p.weight_bytes + static_cast<size_t>(kDwWarps) * kBwdBuffers * StreamTiling<kDwWidth>::kRows * p.stage_stride +
           static_cast<size_t>(shape.n_hidden + 1) * kDwLayerFloats * sizeof(float);
  return p;
}

const void* kernel_for(DType t) {
  return t == DType::F16 ? reinterpret_cast<const void*>(stream_backward_dw_kernel_f16)
                         : reinterpret_cast<const void*>(stream_backward_dw_kernel_bf16);
}

// Blocks of a launch for `batch` rows: one per SM at most (the kernel is sized for one), fewer
// when the batch has fewer rounds of tiles.
int64_t dw_blocks(const FusedShape& shape, DType t, int64_t batch) {
  const int64_t n_tiles = (batch + StreamTiling<kDwWidth>::kRows - 1) / StreamTiling<kDwWidth>::kRows;
  return persistent_grid_blocks(kernel_for(t), kDwWarps * kWarpSize, dw_plan(shape).smem, n_tiles, kDwWarps);
}

}  // namespace

size_t fused_weight_grad_partial_floats(DType t, const FusedShape& shape, int64_t batch) {
  if (!shape_applies(shape) || (t != DType::F16 && t != DType::BF16) || batch <= 0) return 0;
  return static_cast<size_t>(dw_blocks(shape, t, batch)) * dw_partial_floats(kernel_shape(shape, true));
}

int64_t launch_backward_fused_weight_grads(DType t, const FusedShape& shape, const BackwardArgs& args, float* partial,
                                           gpuStream_t stream) {
  if (!fused_weight_grads() || forward_path() == ForwardPath::General) return 0;
  if (!shape_applies(shape) || (t != DType::F16 && t != DType::BF16) || args.batch <= 0) return 0;
  if (args.dL_dinput || args.dz || !partial) return 0;  // dL/dinput would need a fourth buffer
  const DeviceLimits& dev = device_limits();
  if (dev.major < 8) return 0;
  // What the kernel reads with 16-byte copies (launch.h's rules; checked, not assumed).
  if (!aligned16(args.dL_doutput) || args.ld_dout % 8 != 0 || !aligned16(args.hidden_deriv)) return 0;
  if (!aligned16(args.input) || args.ld_in % 8 != 0) return 0;
  const int64_t blocks = dw_blocks(shape, t, args.batch);
  if (blocks < 1) return 0;
  const DwPlan p = dw_plan(shape);
  const int64_t n_tiles = (args.batch + StreamTiling<kDwWidth>::kRows - 1) / StreamTiling<kDwWidth>::kRows;
  const KernelShape ks = kernel_shape(shape, true);
  if (t == DType::F16)
    stream_backward_dw_kernel_f16<<<static_cast<unsigned>(blocks), kDwWarps * kWarpSize, p.smem, stream>>>(
        ks, args, static_cast<int>(p.weight_bytes), p.stage_stride, n_tiles, partial);
  else
    stream_backward_dw_kernel_bf16<<<static_cast<unsigned>(blocks), kDwWarps * kWarpSize, p.smem, stream>>>(
        ks, args, static_cast<int>(p.weight_bytes), p.stage_stride, n_tiles, partial);
  TF_GPU_CHECK_LAUNCH("stream_backward_dw_kernel");
  count_fused_weight_grad_launch();
  return blocks;
}

}  // namespace tinyfuse::cuda::fused
