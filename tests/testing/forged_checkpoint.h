// A checkpoint file built by hand for hostile-input tests and fuzz seeds: any config text stored
// with `n_params` zero parameters and a fresh Adam state for them, both checksums right, so that
// a loader gets past the file's own checks to the config.
#pragma once

#include <string>
#include <vector>

#include "core/safetensors.h"
#include "tinyfuse/object.h"

namespace tinyfuse::testing {

inline std::string checkpoint_with_config(const std::string& config_text, uint64_t n_params) {
  std::vector<float> params(n_params, 0.0f), state(4 * n_params, 0.0f);
  const std::vector<safetensors::TensorOut> tensors = {{"params", params.data(), params.size()},
                                                       {"optimizer_state", state.data(), state.size()}};
  const std::vector<uint8_t> data = safetensors::data_section(tensors);
  const json opt = {{"otype", "Adam"}, {"n_params", n_params}, {"current_step", 0}, {"learning_rate", 1e-3}};
  json header = safetensors::make_header(
      tensors, {{"format", "tinyfuse-checkpoint"}, {"version", "1"}, {"config", config_text}, {"optimizer", opt.dump()},
                {"n_params", std::to_string(n_params)}, {"n_input_dims", "2"}, {"n_output_dims", "1"},
                {"loss_scale", "1.0"}, {"crc32", safetensors::crc32_hex(safetensors::crc32(data.data(), data.size()))}});
  header["__metadata__"]["header_crc32"] = safetensors::crc32_hex(safetensors::crc32(header.dump()));
  const std::vector<uint8_t> file = safetensors::serialize(header, data);
  return std::string(file.begin(), file.end());
}

}  // namespace tinyfuse::testing
