// FullyFusedMLP inference through the streaming kernel (stream_kernel.cuh, KEEP = false): input
// in, output out, nothing else touches memory. Its own unit so that it compiles beside
// stream_forward.cu.
#include "cuda/fused/stream_kernel.cuh"

namespace tinyfuse::cuda::fused {

bool launch_stream_inference(DType t, const FusedShape& shape, const ForwardArgs& args, gpuStream_t stream) {
  if (!args.output || args.hidden_y || args.hidden_z || args.out_z) return false;
  if (!stream_applies(shape, args)) return false;
  return launch_stream<false>(t, shape, args, stream);
}

}  // namespace tinyfuse::cuda::fused
