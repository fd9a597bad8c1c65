#include "cuda/backend.h"

#include "cuda/blaslt_mlp.h"
#include "cuda/fused/fully_fused_mlp.h"
#include "cuda/portable_mlp.h"
#ifdef TINYFUSE_WITH_WIDTH64_FUSED
#include "cuda/width64/width64_fused_mlp.h"
#endif

namespace tinyfuse::cuda {

const std::vector<std::string>& network_otypes() {
  static const std::vector<std::string> names = {"PortableMLP", "BlasLtMLP", "BlasLtMLPFP16", "FullyFusedMLP",
#ifdef TINYFUSE_WITH_WIDTH64_FUSED
                                                 "Width64FusedMLP",
#endif
  };
  return names;
}

std::unique_ptr<Network> make_network(const MlpSpec& spec, json hyperparams) {
  if (spec.otype == "PortableMLP") return make_portable_mlp(spec, std::move(hyperparams));
  if (spec.otype == "BlasLtMLP") return make_blaslt_mlp(spec, std::move(hyperparams), DType::F32);
  if (spec.otype == "BlasLtMLPFP16") return make_blaslt_mlp(spec, std::move(hyperparams), DType::F16);
  if (spec.otype == "FullyFusedMLP") return make_fully_fused_mlp(spec, std::move(hyperparams));
#ifdef TINYFUSE_WITH_WIDTH64_FUSED
  if (spec.otype == "Width64FusedMLP") return make_width64_fused_mlp(spec, std::move(hyperparams));
#endif
  throw UnsupportedError("internal: " + spec.otype + " is not a CUDA network");
}

}  // namespace tinyfuse::cuda
