// The losses on the CPU.
#pragma once

#include <memory>

#include "core/loss_config.h"
#include "tinyfuse/loss.h"

namespace tinyfuse::cpu {

// T: dtype of predictions, targets, values and gradients (float, or double for the reference mode).
template <typename T>
std::unique_ptr<Loss> make_loss(LossKind kind);

}  // namespace tinyfuse::cpu
