// TEMPORARY stub: replaced by the cuBLASLt MLPs.
#include "cuda/blaslt_mlp.h"
#include "tinyfuse/errors.h"
namespace tinyfuse::cuda {
std::unique_ptr<Network> make_blaslt_mlp(const MlpSpec&, json, DType) { throw UnsupportedError("BlasLtMLP: not built yet"); }
}  // namespace tinyfuse::cuda
