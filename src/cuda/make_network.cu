// The CUDA networks by otype. Which otypes a build runs is the otype table's (core/otypes.h); the
// guards here follow its parts: BLAS-Lt in every CUDA build and in HIP builds with hipBLASLt,
// Width64FusedMLP with TINYFUSE_WIDTH64_FUSED.
#include "cuda/backend.h"

#if !defined(TINYFUSE_WITH_HIP) || defined(TINYFUSE_WITH_HIPBLASLT)
#define TINYFUSE_GPU_BLASLT 1
#include "cuda/blaslt_mlp.h"
#endif
#include "cuda/fused/fully_fused_mlp.h"
#include "cuda/portable_mlp.h"
#ifdef TINYFUSE_WITH_WIDTH64_FUSED
#include "cuda/width64/width64_fused_mlp.h"
#endif

namespace tinyfuse::cuda {

std::unique_ptr<Network> make_network(const MlpSpec& spec, json hyperparams) {
  if (spec.otype == "PortableMLP") return make_portable_mlp(spec, std::move(hyperparams));
#ifdef TINYFUSE_GPU_BLASLT
  if (spec.otype == "BlasLtMLP") return make_blaslt_mlp(spec, std::move(hyperparams), DType::F32);
  if (spec.otype == "BlasLtMLPFP16") return make_blaslt_mlp(spec, std::move(hyperparams), DType::F16);
#endif
  if (spec.otype == "FullyFusedMLP") return make_fully_fused_mlp(spec, std::move(hyperparams));
#ifdef TINYFUSE_WITH_WIDTH64_FUSED
  if (spec.otype == "Width64FusedMLP") return make_width64_fused_mlp(spec, std::move(hyperparams));
#endif
  throw UnsupportedError("internal: " + spec.otype + " is not a CUDA network");
}

}  // namespace tinyfuse::cuda
