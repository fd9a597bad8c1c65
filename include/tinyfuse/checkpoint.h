// Checkpoints: a model's config, parameters and optimizer state in one self-describing file that
// any safetensors reader can open (docs/CHECKPOINTS.md describes the format).
#pragma once

#include <string>

#include "tinyfuse/factory.h"

namespace tinyfuse {

// Writes `model` (config, FP32 master parameters, optimizer state, loss scale) to `path`.
// Atomic: the file is written to a temporary file in the same directory, synced and renamed
// over `path`, so a failed save leaves any previous file at `path` intact and no temporary file
// behind. Throws tinyfuse::Error naming the path and the cause.
void save_checkpoint(const std::string& path, const Model& model);

// Loads a checkpoint written by save_checkpoint() into `model`, which must have been built from
// the same config (model.config, compared as JSON values) and the same input/output widths.
// Everything is checked first: the container layout, the header, dtypes and offsets, the
// CRC-32 checksums, the config, the parameter count and the optimizer state (a dry check). Only
// then are the parameters and optimizer state applied. On any problem tinyfuse::Error is thrown
// naming the file and what is wrong, and the model is left unchanged.
void load_checkpoint(const std::string& path, Model& model);

// Builds the model from the config stored in the checkpoint (create_from_config with the stored
// input/output widths and `options`) and loads the checkpoint into it.
Model load_model(const std::string& path, const BuildOptions& options = {});

// The checkpoint's "__metadata__" after the same checks load_checkpoint() makes of the file
// alone: string values, except "config" and "optimizer", which are parsed into JSON.
json read_checkpoint_metadata(const std::string& path);

}  // namespace tinyfuse
