// The CPU multilayer perceptron behind every network otype on the CPU. It is the reference the
// GPU backends are checked against, so it favours clarity; BLAS does the matrix products.
#pragma once

#include <memory>

#include "core/network_config.h"
#include "tinyfuse/network.h"

namespace tinyfuse::cpu {

// T is float (the engine) or double (the reference mode for tests).
template <typename T>
std::unique_ptr<Network> make_mlp(const MlpSpec& spec, json hyperparams);

}  // namespace tinyfuse::cpu
