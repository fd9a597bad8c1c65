// FullyFusedMLP's training pass in one kernel (pipelined/train_step_kernel.cuh): forward, the
// folded loss and backward with the weight gradients, for the shapes the kernel is written for; each block
// writes one FP32 partial per layer, which launch_weight_grad_reduce adds up (as after the
// weight-gradient backward, pipelined/backward_weight_grads.cu, whose partials these equal on the
// same grid).
#include "cuda/fused/pipelined/train_step_kernel.cuh"

namespace tinyfuse::cuda::fused {

namespace {

bool shape_applies(const FusedShape& shape) {
  return shape.width == kDwWidth && shape.act == Activation::ReLU && (shape.in_width == 32 || shape.in_width == 64) &&
         shape.out_width % 16 == 0 && shape.out_width >= 16 && shape.out_width <= dw_max_out_width(shape.out_act) &&
         shape.n_hidden >= 1 && shape.n_hidden <= kTrainMaxHidden;
}

// What loss_epilogue reads: a folded loss, 1 to out_width target columns. (The network passes
// the input and the target only where the kernel can read them in place.)
bool loss_applies(const PlanInputs& in) {
  return is_folded_loss(in.layout.loss_kind) && in.layout.loss_dims >= 1 &&
         in.layout.loss_dims <= in.shape.out_width;
}

// The kernel of a shape: one instantiation per dtype, depth (1, 2), input (32, 64), padded output
// width (16 ... 64; 16 or 32 with an output activation) and output epilogue, so that every width is
// a compile-time constant in it.
using TrainKernel = void (*)(KernelShape, ForwardArgs, int, int64_t, float*);
template <typename T, int H, int IN>
TrainKernel kernel_by_out(const FusedShape& shape) {
  if (shape.out_act != Activation::None)
    return shape.out_width == 16 ? pipelined_train_step_kernel<T, H, IN, 16, Epilogue::Generic>
                                 : pipelined_train_step_kernel<T, H, IN, 32, Epilogue::Generic>;
  switch (shape.out_width) {
    case 16: return pipelined_train_step_kernel<T, H, IN, 16, Epilogue::Identity>;
    case 32: return pipelined_train_step_kernel<T, H, IN, 32, Epilogue::Identity>;
    case 48: return pipelined_train_step_kernel<T, H, IN, 48, Epilogue::Identity>;
    default: return pipelined_train_step_kernel<T, H, IN, 64, Epilogue::Identity>;
  }
}
template <typename T, int H>
TrainKernel kernel_by_in(const FusedShape& shape) {
  return shape.in_width == 32 ? kernel_by_out<T, H, 32>(shape) : kernel_by_out<T, H, 64>(shape);
}
template <typename T>
TrainKernel kernel_of(const FusedShape& shape) {
  return shape.n_hidden == 1 ? kernel_by_in<T, 1>(shape) : kernel_by_in<T, 2>(shape);
}

}  // namespace

FusedPlan plan_pipelined_train_step(const PlanInputs& in) {
  if (!shape_applies(in.shape) || (in.dtype != DType::F16 && in.dtype != DType::BF16) || in.batch <= 0) return {};
  if (in.device->major * 100 + in.device->minor * 10 < kTrainMinArch || !loss_applies(in)) return {};
  // The input is read in place with 16-byte copies (launch.h's rules).
  if (!in.layout.input_ready || in.layout.ld_in < in.shape.in_width) return {};
  const SmemPlan weights = plan_smem(in.shape, 2, static_cast<size_t>(-1));  // every layer resident
  const size_t weight_bytes = (weights.bytes + 15) / 16 * 16;
  const size_t smem = weight_bytes + static_cast<size_t>(kDwWarps) *
                                         (static_cast<size_t>(train_buffers(in.shape.n_hidden)) *
                                              PipelineTiling<kDwWidth>::kRows * kTrainStageStride +
                                          kTrainSumBytes);
  const void* kernel = reinterpret_cast<const void*>(in.dtype == DType::F16 ? kernel_of<__half>(in.shape)
                                                                            : kernel_of<__nv_bfloat16>(in.shape));
  const int64_t n_tiles = (in.batch + PipelineTiling<kDwWidth>::kRows - 1) / PipelineTiling<kDwWidth>::kRows;
  // One block per SM at most (the kernel is sized for one), fewer when the batch has fewer rounds.
  const int64_t blocks = persistent_grid_blocks(*in.device, kernel, kDwWarps * kWarpSize, smem, n_tiles, kDwWarps);
  FusedPlan p;
  if (blocks < 1) return p;
  p.kernel = FusedKernel::PipelinedTrainStep;
  p.function = kernel;
  p.blocks = static_cast<unsigned>(blocks);
  p.threads = kDwWarps * kWarpSize;
  p.smem = smem;
  p.params.shape = kernel_shape(in.shape, true);
  p.params.n_tiles = n_tiles;
  p.params.weight_bytes = static_cast<int>(weight_bytes);
  p.params.partial_floats_per_block = dw_partial_floats(p.params.shape);
  return p;
}

}  // namespace tinyfuse::cuda::fused
