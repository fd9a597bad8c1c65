// load_checkpoint() and load_model() on a file's bytes already in memory: the same checks, in the
// same order, and the same all-or-nothing apply. The checkpoint fuzzer's entry points (no file
// per input).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tinyfuse/factory.h"

namespace tinyfuse {

// `name` stands for the path in messages.
void load_checkpoint_bytes(const uint8_t* data, size_t size, const std::string& name, Model& model);
Model load_model_bytes(const uint8_t* data, size_t size, const std::string& name, const BuildOptions& options = {});

}  // namespace tinyfuse
