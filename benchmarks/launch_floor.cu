// The smallest piece of GPU work tinyfuse-bench can time: an empty kernel. Timed exactly as the
// networks are (gpu_bench.cpp), it is the floor under every per-call figure: the host's launch,
// the GPU picking the kernel up, and the events around it.
#include "launch_floor.h"

namespace tinyfuse::bench {

namespace {
__global__ void empty_kernel() {}
}  // namespace

cudaError_t queue_empty_kernel(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  return cudaGetLastError();
}

}  // namespace tinyfuse::bench
