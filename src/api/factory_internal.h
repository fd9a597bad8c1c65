// The factory's steps, for the library's own use.
#pragma once

#include "tinyfuse/factory.h"

namespace tinyfuse {

// create_from_config without the Trainer: the loss, optimizer and network, none of which holds
// parameter memory yet, and the config. load_model compares the network's parameter count with
// a checkpoint's before a Trainer allocates anything.
Model create_model_objects(uint32_t n_input_dims, uint32_t n_output_dims, const json& config,
                           const BuildOptions& options);

}  // namespace tinyfuse
