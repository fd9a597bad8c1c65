// Placeholder until the `grid` branch (the Grid kernels) is merged; delete this file then.
#include "cuda/encodings/grid_encoding.h"

namespace tinyfuse::cuda {

std::unique_ptr<Encoding> make_grid_encoding(const GridSpec&) {
  throw UnsupportedError("Grid encoding on CUDA: not in this build yet");
}

}  // namespace tinyfuse::cuda
