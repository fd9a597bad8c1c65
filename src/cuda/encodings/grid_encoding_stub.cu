// Placeholder until the `grid` branch (the Grid kernels, src/cuda/encodings/grid*.cu) is merged;
// delete this file then. grid_encoding.h is that branch's header, unchanged.
#include "cuda/encodings/grid_encoding.h"

namespace tinyfuse::cuda {

std::unique_ptr<Encoding> make_grid_encoding(const GridSpec&, DType, DType) {
  throw UnsupportedError("Grid encoding on CUDA: not in this build yet");
}

}  // namespace tinyfuse::cuda
