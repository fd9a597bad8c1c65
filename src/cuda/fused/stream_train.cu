// FullyFusedMLP's training pass in one kernel (stream_train_kernel.cuh): forward, L2 loss and
// backward with the weight gradients, for the shapes the kernel is written for; each block
// writes one FP32 partial per layer, which launch_weight_grad_reduce adds up (as after the
// weight-gradient backward, stream_backward_wgrad.cu, whose partials these equal on the same grid).
#include "cuda/fused/forward_choice.h"
#include "cuda/fused/stream_train_kernel.cuh"

namespace tinyfuse::cuda::fused {

namespace {

bool shape_applies(const FusedShape& shape) {
  return shape.width == kDwWidth && shape.act == Activation::ReLU && shape.out_act == Activation::None &&
         (shape.in_width == 32 || shape.in_width == 64) && shape.out_width % 16 == 0 && shape.out_width >= 16 &&
         shape.out_width <= kDwWidth && shape.n_hidden >= 1 && shape.n_hidden <= kTrainMaxHidden;
}

// What loss_epilogue reads: the folded loss, a target it can address (16-byte loads only where
// aligned), somewhere for the values.
bool loss_applies(const FusedShape& shape, const ForwardArgs::Loss& L) {
  if (L.kind != static_cast<int>(kFoldedLoss)) return false;
  if (!L.target || !L.values || L.dims < 1 || L.dims > shape.out_width || L.ld_target < L.dims) return false;
  return !L.vector_target || (aligned16(L.target) && L.ld_target % 4 == 0);
}

struct TrainPlan {
  size_t weight_bytes, smem;
};

TrainPlan train_plan(const FusedShape& shape) {
  const SmemPlan weights = plan_smem(shape, 2, static_cast<size_t>(-1));  // every layer resident
  TrainPlan p;
  p.weight_bytes = (weights.bytes + 15) / 16 * 16;
  p.smem = p.weight_bytes + static_cast<size_t>(kDwWarps) * (static_cast<size_t>(train_buffers(shape.n_hidden)) *
                                                                   StreamTiling<kDwWidth>::kRows * kTrainStageStride +
                                                               kTrainSumBytes);
  return p;
}

// The kernel of a shape: one instantiation per dtype, depth (1, 2), input (32, 64) and padded
// output width (16 ... 64), so that every width is a compile-time constant in it.
using TrainKernel = void (*)(KernelShape, ForwardArgs, int, int64_t, float*);
template <typename T, int H, int IN>
TrainKernel kernel_by_out(int out) {
  switch (out) {
    case 16: return stream_train_kernel<T, H, IN, 16>;
    case 32: return stream_train_kernel<T, H, IN, 32>;
    case 48: return stream_train_kernel<T, H, IN, 48>;
    default: return stream_train_kernel<T, H, IN, 64>;
  }
}
template <typename T, int H>
TrainKernel kernel_by_in(const FusedShape& shape) {
  return shape.in_width == 32 ? kernel_by_out<T, H, 32>(shape.out_width) : kernel_by_out<T, H, 64>(shape.out_width);
}
template <typename T>
TrainKernel kernel_of(const FusedShape& shape) {
  return shape.n_hidden == 1 ? kernel_by_in<T, 1>(shape) : kernel_by_in<T, 2>(shape);
}
TrainKernel kernel_for(DType t, const FusedShape& shape) {
  return t == DType::F16 ? kernel_of<__half>(shape) : kernel_of<__nv_bfloat16>(shape);
}

// It folds the loss and forms the weight gradients inside: switching either off switches it off.
bool switched_on() {
  return fused_train_step() && fused_loss() && fused_weight_grads() && forward_path() != ForwardPath::General;
}

bool arch_applies() {
  const DeviceLimits& dev = device_limits();
  return dev.major * 100 + dev.minor * 10 >= kTrainMinArch;
}

// Blocks of a launch for `batch` rows: one per SM at most (the kernel is sized for one), fewer
// when the batch has fewer rounds of tiles; 0 when the kernel does not fit.
int64_t train_blocks(const FusedShape& shape, DType t, int64_t batch) {
  const int64_t n_tiles = (batch + StreamTiling<kDwWidth>::kRows - 1) / StreamTiling<kDwWidth>::kRows;
  return persistent_grid_blocks(reinterpret_cast<const void*>(kernel_for(t, shape)), kDwWarps * kWarpSize,
                                train_plan(shape).smem, n_tiles, kDwWarps);
}

void launch(DType t, const FusedShape& shape, const ForwardArgs& args, float* partial, int64_t blocks,
            gpuStream_t stream) {
  const TrainPlan p = train_plan(shape);
  const int64_t n_tiles = (args.batch + StreamTiling<kDwWidth>::kRows - 1) / StreamTiling<kDwWidth>::kRows;
  kernel_for(t, shape)<<<static_cast<unsigned>(blocks), kDwWarps * kWarpSize, p.smem, stream>>>(
      kernel_shape(shape, true), args, static_cast<int>(p.weight_bytes), n_tiles, partial);
  TF_GPU_CHECK_LAUNCH("stream_train_kernel");
}

}  // namespace

namespace {

// Blocks of the launch for these args; 0 where the kernel does not apply.
int64_t applicable_blocks(DType t, const FusedShape& shape, const ForwardArgs& args) {
  if (!switched_on()) return 0;
  if (!shape_applies(shape) || (t != DType::F16 && t != DType::BF16) || args.batch <= 0) return 0;
  if (!arch_applies() || !loss_applies(shape, args.loss)) return 0;
  // The input is read with 16-byte copies (launch.h's rules; checked, not assumed).
  if (!aligned16(args.input) || args.ld_in % 8 != 0 || args.ld_in < shape.in_width) return 0;
  return train_blocks(shape, t, args.batch);
}

}  // namespace

size_t fused_train_partial_floats(DType t, const FusedShape& shape, const ForwardArgs& args) {
  const int64_t blocks = applicable_blocks(t, shape, args);
  return blocks < 1 ? 0 : static_cast<size_t>(blocks) * dw_partial_floats(kernel_shape(shape, true));
}

int64_t launch_fused_train_step(DType t, const FusedShape& shape, const ForwardArgs& args, float* partial,
                                gpuStream_t stream) {
  const int64_t blocks = partial ? applicable_blocks(t, shape, args) : 0;
  if (blocks < 1) return 0;
  launch(t, shape, args, partial, blocks, stream);
  count_fused_train_step_launch();
  return blocks;
}

}  // namespace tinyfuse::cuda::fused
