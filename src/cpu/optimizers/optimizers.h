// The optimizers on the CPU, built from their JSON config.
#pragma once

#include <memory>
#include <string>

#include "tinyfuse/optimizer.h"

namespace tinyfuse::cpu {

// `path` names the config's place in messages ("optimizer", "optimizer.nested").
std::unique_ptr<Optimizer> make_optimizer(const json& config, const std::string& path = "optimizer");

}  // namespace tinyfuse::cpu
