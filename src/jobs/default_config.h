// The models learn-image and learn-sdf train when no config is given (the CLI and samples/learn_*.py).
#pragma once

#include "tinyfuse/object.h"

namespace tinyfuse::jobs {

// A tiny-cuda-nn config: {"loss", "optimizer", "encoding", "network"}, 2 inputs -> 3 outputs.
json default_learn_image_config();

// {"optimizer", "encoding", "network"}, 3 inputs -> 1 output (learn-sdf computes its own loss).
json default_learn_sdf_config();

}  // namespace tinyfuse::jobs
