// A non-blocking CUDA stream owned by a test. Declare it before the buffers, models and contexts
// that use it: they free stream-ordered memory on it when they are destroyed, so the stream must
// outlive them (destroying a stream that still has users is undefined behaviour in CUDA).
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>

namespace tinyfuse::testing {

class OwnedStream {
 public:
  OwnedStream() {
    if (cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess)
      throw std::runtime_error("cudaStreamCreateWithFlags failed");
  }
  ~OwnedStream() {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  cudaStream_t get() const { return stream_; }
  operator cudaStream_t() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace tinyfuse::testing
