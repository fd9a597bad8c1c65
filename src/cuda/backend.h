// What the CUDA backend builds, by kind of object. The factory (src/core/factory.cpp) calls these
// for Device::CUDA after the device-neutral config parsing has checked every rule.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/loss_config.h"
#include "core/network_config.h"
#include "tinyfuse/loss.h"
#include "tinyfuse/network.h"
#include "tinyfuse/optimizer.h"

namespace tinyfuse::cuda {

// The network otypes this backend runs (canonical spellings).
const std::vector<std::string>& network_otypes();

std::unique_ptr<Network> make_network(const MlpSpec& spec, json hyperparams);
std::unique_ptr<Loss> make_loss(LossKind kind);
std::unique_ptr<Optimizer> make_optimizer(const json& config, const std::string& path);

}  // namespace tinyfuse::cuda
