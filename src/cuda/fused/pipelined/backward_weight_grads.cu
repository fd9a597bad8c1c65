// FullyFusedMLP's backward with the weight gradients inside the pipelined kernel
// (pipelined/backward_weight_grads_kernel.cuh): dZ never leaves the kernel; each block writes one
// FP32 partial per layer, which launch_weight_grad_reduce adds up. The planner asks it first when
// parameter gradients are wanted (with or without dL/dinput); where it does not take the call, the
// backward kernel and the weight-gradient kernels run.
#include "cuda/fused/pipelined/backward_weight_grads_kernel.cuh"

namespace tinyfuse::cuda::fused {

namespace {

// The kernel, one per dtype and output epilogue (its body: backward_weight_grads_kernel.cuh).
template <Epilogue OUT>
__global__ void __launch_bounds__(kDwWarps* kWarpSize, 1)
    pipelined_backward_dw_kernel_f16(KernelShape s, BackwardArgs args, int weight_bytes, int stage_stride, int64_t n_tiles,
                                  float* partial) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  pipelined_backward_dw_body<__half, OUT>(s, args, weight_bytes, stage_stride, n_tiles, partial);
#else
  __trap();  // never launched: the launcher checks the architecture first
#endif
}

template <Epilogue OUT>
__global__ void __launch_bounds__(kDwWarps* kWarpSize, 1)
    pipelined_backward_dw_kernel_bf16(KernelShape s, BackwardArgs args, int weight_bytes, int stage_stride,
                                   int64_t n_tiles, float* partial) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  pipelined_backward_dw_body<__nv_bfloat16, OUT>(s, args, weight_bytes, stage_stride, n_tiles, partial);
#else
  __trap();  // never launched: the launcher checks the architecture first
#endif
}

template <Epilogue OUT>
const void* dw_kernel(DType dtype) {
  return dtype == DType::F16 ? reinterpret_cast<const void*>(pipelined_backward_dw_kernel_f16<OUT>)
                             : reinterpret_cast<const void*>(pipelined_backward_dw_kernel_bf16<OUT>);
}

// The shapes the kernel is written for (its header says why these).
bool shape_applies(const FusedShape& shape) {
  return shape.width == kDwWidth && shape.act == Activation::ReLU && (shape.in_width == 32 || shape.in_width == 64) &&
         shape.out_width % 16 == 0 && shape.out_width <= dw_max_out_width(shape.out_act) && shape.n_hidden >= 1 &&
         shape.n_hidden + 1 <= kDwMaxLayers;
}

}  // namespace

FusedPlan plan_pipelined_weight_grads(const PlanInputs& in) {
  if (!shape_applies(in.shape) || (in.dtype != DType::F16 && in.dtype != DType::BF16) || in.batch <= 0) return {};
  if (in.layout.dz) return {};  // dZ never leaves this kernel
  if (in.device->major < 8) return {};
  const SmemPlan weights = plan_smem(in.shape, 2, static_cast<size_t>(-1));  // every layer resident
  const size_t weight_bytes = (weights.bytes + 15) / 16 * 16;
  const int stage_stride = (kDwWidth + kSmemPad) * 2;  // in and out are at most 64 wide
  const size_t smem = weight_bytes +
                      static_cast<size_t>(kDwWarps) * kBwdBuffers * PipelineTiling<kDwWidth>::kRows * stage_stride +
                      static_cast<size_t>(in.shape.n_hidden + 1) * kDwLayerFloats * sizeof(float);
  const void* kernel = in.shape.out_act == Activation::None ? dw_kernel<Epilogue::Identity>(in.dtype)
                                                           : dw_kernel<Epilogue::Generic>(in.dtype);
  const int64_t n_tiles = (in.batch + PipelineTiling<kDwWidth>::kRows - 1) / PipelineTiling<kDwWidth>::kRows;
  // One block per SM at most (the kernel is sized for one), fewer when the batch has fewer rounds.
  const int64_t blocks = persistent_grid_blocks(*in.device, kernel, kDwWarps * kWarpSize, smem, n_tiles, kDwWarps);
  FusedPlan p;
  if (blocks < 1) return p;
  p.kernel = FusedKernel::PipelinedWeightGrads;
  p.function = kernel;
  p.blocks = static_cast<unsigned>(blocks);
  p.threads = kDwWarps * kWarpSize;
  p.smem = smem;
  p.params.shape = kernel_shape(in.shape, true);
  p.params.n_tiles = n_tiles;
  p.params.weight_bytes = static_cast<int>(weight_bytes);
  p.params.stage_stride = stage_stride;
  p.params.partial_floats_per_block = dw_partial_floats(p.params.shape);
  return p;
}

}  // namespace tinyfuse::cuda::fused
