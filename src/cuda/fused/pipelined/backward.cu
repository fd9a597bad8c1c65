// FullyFusedMLP's backward pass through the pipelined kernel (pipelined/backward_kernel.cuh): every
// dZ and dL/dinput that fused_backward_kernel writes, bit for bit. The planner asks it first for
// the backward pass; where it does not take the call, the general kernel runs.
#include "cuda/fused/pipelined/backward_kernel.cuh"

namespace tinyfuse::cuda::fused {

namespace {

template <typename T, int WIDTH, Epilogue HIDDEN, Epilogue OUT, int BUFFERS>
FusedPlan plan_buffers(const PlanInputs& in) {
  using Tl = PipelineTiling<WIDTH>;
  const FusedShape& shape = in.shape;
  const SmemPlan plan = plan_smem(shape, sizeof(T), static_cast<size_t>(-1));  // every layer resident
  const size_t weight_bytes = (plan.bytes + 15) / 16 * 16;
  // A ring buffer holds a hidden layer's saved rows then its dZ, dL/doutput (and out_z beside it),
  // or dL/dinput; with one buffer, item 0 (dL/doutput, out_z) has a narrow one of its own.
  const bool out_z = output_keeps_z(shape.out_act);
  const int item0_cols = BUFFERS == kBwdBuffers ? (out_z ? 2 * shape.out_width : shape.out_width) : 0;
  const int stage_cols = std::max({shape.width, item0_cols, in.layout.dL_dinput ? shape.in_width : 0});
  const int stage_stride = (stage_cols + kSmemPad) * static_cast<int>(sizeof(T));
  const int item0_bytes =
      BUFFERS == kBwdBuffers ? 0 : Tl::kRows * output_item_stride(shape.out_width, out_z, static_cast<int>(sizeof(T)));
  const size_t smem =
      weight_bytes + static_cast<size_t>(kWarpsPerBlock) * (BUFFERS * Tl::kRows * stage_stride + item0_bytes);
  const void* kernel = reinterpret_cast<const void*>(pipelined_backward_kernel<T, WIDTH, HIDDEN, OUT, BUFFERS>);
  const int64_t n_tiles = (in.batch + Tl::kRows - 1) / Tl::kRows;
  const int64_t blocks = persistent_grid_blocks(*in.device, kernel, kWarpsPerBlock * kWarpSize, smem, n_tiles, kWarpsPerBlock);
  FusedPlan p;
  if (blocks < 1) return p;  // too deep for shared memory
  p.kernel = FusedKernel::Pipelined;
  p.function = kernel;
  p.blocks = static_cast<unsigned>(blocks);
  p.threads = kWarpsPerBlock * kWarpSize;
  p.smem = smem;
  p.params.shape = kernel_shape(shape, true);
  p.params.n_tiles = n_tiles;
  p.params.weight_bytes = static_cast<int>(weight_bytes);
  p.params.stage_stride = stage_stride;
  return p;
}

// The ring where it fits; at 128 wide, where it does not, one buffer (W2's 128 x 5 behind OneBlob:
// 174 KiB of weights + 102 KiB for the ring > 227 KiB; 214 KiB with one buffer).
template <typename T, int WIDTH, Epilogue HIDDEN, Epilogue OUT>
FusedPlan plan_variant(const PlanInputs& in) {
  FusedPlan p = plan_buffers<T, WIDTH, HIDDEN, OUT, kBwdBuffers>(in);
  if constexpr (WIDTH == 128) {
    if (p.kernel == FusedKernel::None) p = plan_buffers<T, WIDTH, HIDDEN, OUT, kOneBuffer>(in);
  }
  return p;
}

template <typename T, int WIDTH>
FusedPlan plan_width(const PlanInputs& in) {
  if (in.shape.act == Activation::ReLU && in.shape.out_act == Activation::None)
    return plan_variant<T, WIDTH, Epilogue::Relu, Epilogue::Identity>(in);
  return plan_variant<T, WIDTH, Epilogue::Generic, Epilogue::Generic>(in);
}

template <typename T>
FusedPlan plan_typed(const PlanInputs& in) {
  switch (in.shape.width) {
    case 16: return plan_width<T, 16>(in);
    case 32: return plan_width<T, 32>(in);
    case 64: return plan_width<T, 64>(in);
    case 128: return plan_width<T, 128>(in);
  }
  return {};
}

}  // namespace

FusedPlan plan_pipelined_backward(const PlanInputs& in) {
  if (in.batch <= 0 || (!in.layout.dz && !in.layout.dL_dinput)) return {};
  if (in.shape.in_width > kPipelinedMaxIoWidth || in.shape.out_width > kPipelinedMaxIoWidth) return {};
  if (in.device->major * 100 + in.device->minor * 10 < kPipelinedBackwardMinArch) return {};  // see the kernel
  if (in.dtype == DType::F16) return plan_typed<__half>(in);
  if (in.dtype == DType::BF16) return plan_typed<__nv_bfloat16>(in);
  return {};
}

}  // namespace tinyfuse::cuda::fused
