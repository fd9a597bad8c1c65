// FullyFusedMLP's training forward through the streaming kernel (stream_kernel.cuh, KEEP = true):
// besides the output (or, with args.loss, the loss's gradients and per-row values in its place),
// every hidden layer's y, z where hidden_keeps_z and the output layer's z
// where output_keeps_z, bit for bit what fused_forward_kernel writes, so backward() cannot tell
// which kernel made its context. Its own unit so that it compiles beside stream_inference.cu.
// sm_90+ only (stream_kernel.cuh says why); below, training runs fused_forward_kernel.
#include "cuda/fused/stream_kernel.cuh"

namespace tinyfuse::cuda::fused {

namespace {

// What loss_epilogue takes: its one loss (kFoldedLoss), dense aligned gradients, and a target
// whose 16-byte loads are aligned if it asks for them.
bool loss_applies(const FusedShape& shape, const ForwardArgs::Loss& L) {
  if (!L.gradients) return true;  // no loss asked for
  if (L.kind != static_cast<int>(kFoldedLoss)) return false;
  // At 128 wide the training forward runs at its register cap (254 of 255): with the loss folded
  // the step measured 308 M samples/s at 2^20 against 446 M with the loss kernel (H200,
  // docs/PERFORMANCE.md), so 128 wide keeps the loss kernel.
  if (shape.width > 64) return false;
  if (!L.target || !L.values || L.dims < 1 || L.dims > shape.out_width) return false;
  if (L.vector_target && (!aligned16(L.target) || L.ld_target % 4 != 0)) return false;
  return aligned16(L.gradients) && L.ld_grad % 8 == 0 && L.ld_grad >= shape.out_width && L.ld_target >= L.dims;
}

bool arch_applies() {  // see the kernel
  return device_limits().major * 100 + device_limits().minor * 10 >= kStreamKeepMinArch;
}

}  // namespace

bool launch_stream_forward(DType t, const FusedShape& shape, const ForwardArgs& args, gpuStream_t stream) {
  if (!args.hidden_y) return false;
  // z comes only from the run-time epilogue (ReLU hidden layers and identity outputs are
  // specialised without it); FullyFusedMlp never asks for more than the keep rules say.
  if ((args.hidden_z != nullptr) != hidden_keeps_z(shape.act)) return false;
  if ((args.out_z != nullptr) != output_keeps_z(shape.out_act)) return false;
  if (!aligned16(args.hidden_y) || !aligned16(args.hidden_z) || !aligned16(args.out_z)) return false;
  if (!loss_applies(shape, args.loss)) return false;
  if (!stream_applies(shape, args)) return false;
  if (!arch_applies()) return false;
  return launch_stream<true>(t, shape, args, stream);
}

bool stream_forward_takes_loss(const FusedShape& shape, const ForwardArgs::Loss& loss) {
  return loss.gradients && loss_applies(shape, loss) && arch_applies();
}

}  // namespace tinyfuse::cuda::fused
