// FullyFusedMLP's backward pass through the streaming kernel (stream_backward_kernel.cuh): every
// dZ and dL/dinput that fused_backward_kernel writes, bit for bit. launch_backward tries it first
// on CUDA builds; false means it does not apply and the general kernel runs.
#include "cuda/fused/stream_backward_kernel.cuh"

namespace tinyfuse::cuda::fused {

namespace {

template <typename T, int WIDTH, Epilogue HIDDEN, Epilogue OUT>
bool launch_backward_variant(const FusedShape& shape, const BackwardArgs& args, gpuStream_t stream) {
  using Tl = StreamTiling<WIDTH>;
  const SmemPlan plan = plan_smem(shape, sizeof(T), static_cast<size_t>(-1));  // every layer resident
  const size_t weight_bytes = (plan.bytes + 15) / 16 * 16;
  // A buffer holds a hidden layer's saved rows then its dZ, dL/doutput (and out_z beside it), or
  // dL/dinput.
  const int stage_cols =
      std::max({shape.width, output_keeps_z(shape.out_act) ? 2 * shape.out_width : shape.out_width,
                args.dL_dinput ? shape.in_width : 0});
  const int stage_stride = (stage_cols + kSmemPad) * static_cast<int>(sizeof(T));
  const size_t smem = weight_bytes + static_cast<size_t>(kWarpsPerBlock) * kBwdBuffers * Tl::kRows * stage_stride;
  const auto kernel = stream_backward_kernel<T, WIDTH, HIDDEN, OUT>;
  const int64_t n_tiles = (args.batch + Tl::kRows - 1) / Tl::kRows;
  const int64_t blocks = persistent_grid_blocks(reinterpret_cast<const void*>(kernel), kWarpsPerBlock * kWarpSize, smem,
                                                n_tiles, kWarpsPerBlock);
  if (blocks < 1) return false;
  kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * kWarpSize, smem, stream>>>(
      kernel_shape(shape, true), args, static_cast<int>(weight_bytes), stage_stride, n_tiles);
  TF_GPU_CHECK_LAUNCH("stream_backward_kernel");
  return true;
}

template <typename T, int WIDTH>
bool launch_backward_width(const FusedShape& shape, const BackwardArgs& args, gpuStream_t stream) {
  if (shape.act == Activation::ReLU && shape.out_act == Activation::None)
    return launch_backward_variant<T, WIDTH, Epilogue::Relu, Epilogue::Identity>(shape, args, stream);
  return launch_backward_variant<T, WIDTH, Epilogue::Generic, Epilogue::Generic>(shape, args, stream);
}

template <typename T>
bool launch_backward_typed(const FusedShape& shape, const BackwardArgs& args, gpuStream_t stream) {
  switch (shape.width) {
    case 16: return launch_backward_width<T, 16>(shape, args, stream);
    case 32: return launch_backward_width<T, 32>(shape, args, stream);
    case 64: return launch_backward_width<T, 64>(shape, args, stream);
    case 128: return launch_backward_width<T, 128>(shape, args, stream);
  }
  return false;
}

}  // namespace

bool launch_stream_backward(DType t, const FusedShape& shape, const BackwardArgs& args, gpuStream_t stream) {
  if (args.batch <= 0 || (!args.dz && !args.dL_dinput)) return false;
  if (shape.in_width > kStreamMaxIoWidth || shape.out_width > kStreamMaxIoWidth) return false;
  // What the kernel reads or writes with 16-byte copies (launch.h's rules; checked, not assumed).
  if (!aligned16(args.dL_doutput) || args.ld_dout % 8 != 0 || !aligned16(args.dz)) return false;
  if (args.dL_dinput && (!aligned16(args.dL_dinput) || args.ld_din % 8 != 0)) return false;
  if (shape.act != Activation::None && (!args.hidden_deriv || !aligned16(args.hidden_deriv))) return false;
  if (output_keeps_z(shape.out_act) && (!args.out_z || !aligned16(args.out_z))) return false;
  const DeviceLimits& dev = device_limits();
  if (dev.major * 100 + dev.minor * 10 < kStreamBackwardMinArch) return false;  // see the kernel
  if (t == DType::F16) return launch_backward_typed<__half>(shape, args, stream);
  if (t == DType::BF16) return launch_backward_typed<__nv_bfloat16>(shape, args, stream);
  return false;
}

}  // namespace tinyfuse::cuda::fused
