// The limits of a config (tinyfuse/limits.h), checked on the json value before anything reads it
// or is built from it: how deep the JSON nests, how deep configs nest in configs ("nested"), and
// how many encodings and optimizers it describes. The factory's entry points call these, so a
// json value built in C++ is held to the same limits as a config file.
#pragma once

#include <string>

#include "tinyfuse/object.h"

namespace tinyfuse {

// A whole model config {"loss", "optimizer", "encoding", "network"}. Throws ConfigError.
void check_model_config_limits(const json& config);

// One section ("encoding", "optimizer", ...) at `path`. Throws ConfigError.
void check_section_config_limits(const json& config, const std::string& path);

}  // namespace tinyfuse
