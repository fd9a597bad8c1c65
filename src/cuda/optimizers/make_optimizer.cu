// TEMPORARY stub: replaced by the GPU optimizers.
#include "cuda/backend.h"
namespace tinyfuse::cuda {
std::unique_ptr<Optimizer> make_optimizer(const json&, const std::string&) { throw UnsupportedError("GPU optimizers: not built yet"); }
}  // namespace tinyfuse::cuda
