// FullyFusedMLP's training forward through the streaming kernel (stream_kernel.cuh, KEEP = true):
// besides the output, every hidden layer's y, z where hidden_keeps_z and the output layer's z
// where output_keeps_z, bit for bit what fused_forward_kernel writes, so backward() cannot tell
// which kernel made its context. Its own unit so that it compiles beside stream_inference.cu.
// sm_90+ only (stream_kernel.cuh says why); below, training runs fused_forward_kernel.
#include "cuda/fused/stream_kernel.cuh"

namespace tinyfuse::cuda::fused {

namespace {


}  // namespace

bool launch_stream_forward(DType t, const FusedShape& shape, const ForwardArgs& args, gpuStream_t stream) {
  if (!args.hidden_y) return false;
  // z comes only from the run-time epilogue (ReLU hidden layers and identity outputs are
  // specialised without it); FullyFusedMlp never asks for more than the keep rules say.
  if ((args.hidden_z != nullptr) != hidden_keeps_z(shape.act)) return false;
  if ((args.out_z != nullptr) != output_keeps_z(shape.out_act)) return false;
  if (!aligned16(args.hidden_y) || !aligned16(args.hidden_z) || !aligned16(args.out_z)) return false;
  if (!stream_applies(shape, args)) return false;
  if (device_limits().major * 100 + device_limits().minor * 10 < kStreamKeepMinArch) return false;  // see the kernel
  return launch_stream<true>(t, shape, args, stream);
}

}  // namespace tinyfuse::cuda::fused
