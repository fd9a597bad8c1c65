// TEMPORARY stub: replaced by the PortableMLP kernels.
#include "cuda/portable_mlp.h"
#include "tinyfuse/errors.h"
namespace tinyfuse::cuda {
std::unique_ptr<Network> make_portable_mlp(const MlpSpec&, json) { throw UnsupportedError("PortableMLP on CUDA: not built yet"); }
}  // namespace tinyfuse::cuda
