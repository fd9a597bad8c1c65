// An empty kernel for tinyfuse-bench's launch floor (launch_floor.cu).
#pragma once

#include <cuda_runtime.h>

namespace tinyfuse::bench {

// Queues one empty kernel (1 block of 32 threads) on `stream`.
cudaError_t queue_empty_kernel(cudaStream_t stream);

}  // namespace tinyfuse::bench
