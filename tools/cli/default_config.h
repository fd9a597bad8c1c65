// The model learn-image trains when no --config is given.
#pragma once

#include "tinyfuse/object.h"

namespace tinyfuse::cli {

// A tiny-cuda-nn config: {"loss", "optimizer", "encoding", "network"}, 2 inputs -> 3 outputs.
json default_learn_image_config();

}  // namespace tinyfuse::cli
