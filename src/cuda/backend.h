// What the CUDA backend builds, by kind of object. The factory (src/api/factory.cpp) calls these
// for Device::CUDA after the device-neutral config parsing has checked every rule and the otype
// table (core/otypes.h) has said this build runs the otype.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/loss_config.h"
#include "core/network_config.h"
#include "core/optimizer_config.h"
#include "tinyfuse/loss.h"
#include "tinyfuse/network.h"
#include "tinyfuse/optimizer.h"

namespace tinyfuse::cuda {

std::unique_ptr<Network> make_network(const MlpSpec& spec, json hyperparams);
std::unique_ptr<Loss> make_loss(LossKind kind);
std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec);

}  // namespace tinyfuse::cuda
