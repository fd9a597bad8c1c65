#include "cuda/backend.h"

#include "cuda/blaslt_mlp.h"
#include "cuda/fused/fully_fused_mlp.h"
#include "cuda/portable_mlp.h"

namespace tinyfuse::cuda {

const std::vector<std::string>& network_otypes() {
  static const std::vector<std::string> names = {"PortableMLP", "BlasLtMLP", "BlasLtMLPFP16", "FullyFusedMLP"};
  return names;
}

std::unique_ptr<Network> make_network(const MlpSpec& spec, json hyperparams) {
  if (spec.otype == "PortableMLP") return make_portable_mlp(spec, std::move(hyperparams));
  if (spec.otype == "BlasLtMLP") return make_blaslt_mlp(spec, std::move(hyperparams), DType::F32);
  if (spec.otype == "BlasLtMLPFP16") return make_blaslt_mlp(spec, std::move(hyperparams), DType::F16);
  if (spec.otype == "FullyFusedMLP") return make_fully_fused_mlp(spec, std::move(hyperparams));
  throw UnsupportedError("internal: " + spec.otype + " is not a CUDA network");
}

}  // namespace tinyfuse::cuda
