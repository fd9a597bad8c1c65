// A kernel that only moves an inference call's bytes (copy_reference.cu): what any network that
// reads the same input and writes the same output could reach at best, launch included.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

namespace tinyfuse::bench {

// Queues a copy of `bytes` from `in` to `out` on `stream`: both 16-byte aligned, `bytes` a
// multiple of 16 (else cudaErrorInvalidValue); one 16-byte chunk per thread, 256 threads per block.
cudaError_t queue_copy_kernel(const void* in, void* out, size_t bytes, cudaStream_t stream);

}  // namespace tinyfuse::bench
