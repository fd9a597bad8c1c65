// Training batches of learn-image drawn on the GPU: the picture is uploaded once, and each batch's
// positions and bilinear target colours are made by one kernel, so sampling costs the host nothing
// at large batches. The positions are exactly those the CPU path draws (the same PCG32 stream,
// each thread jumping ahead to its own draws) and the colours follow sample_bilinear's rules, so a
// seed gives the same batches on either device.
#pragma once

#include <cstdint>
#include <memory>

#include "jobs/image.h"
#include "tinyfuse/buffer.h"

namespace tinyfuse::cli {

class GpuImageSampler {
 public:
  // Batches of `batch` positions, written as `position_dtype` (F32 or F16); the generator is
  // PCG32 seeded with (seed, stream), as the CPU path's Pcg32(seed, stream).
  GpuImageSampler(const jobs::Image& image, int64_t batch, DType position_dtype, uint64_t seed, uint64_t stream);
  ~GpuImageSampler();

  // Queues the next batch on this thread's default stream; the views stay valid until the next call.
  void next(TensorView& positions, TensorView& colours);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tinyfuse::cli
