// Adam's checkpoint state, one format for every device (a GPU state loads into a CPU optimizer
// and back): [first moments | second moments | param steps % 2^16 | param steps / 2^16], the step
// counters split so that every value is exact in a float.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "core/optimizers/optimizer_base.h"

namespace tinyfuse::adam_state {

inline size_t size(size_t n_params) { return 4 * n_params; }

inline json header(const std::string& otype, size_t n_params, uint32_t step, float learning_rate) {
  return {{"otype", otype},
          {"n_params", n_params},
          {"current_step", step},
          {"learning_rate", tidy_float(learning_rate)},
          {"layout", "first_moments, second_moments, param_steps % 65536, param_steps / 65536"}};
}

// Writes the two float halves of each step counter into data[2n, 4n).
inline void pack_steps(const uint32_t* steps, size_t n, float* data) {
  for (size_t i = 0; i < n; ++i) {
    data[2 * n + i] = static_cast<float>(steps[i] & 0xffffu);
    data[3 * n + i] = static_cast<float>(steps[i] >> 16);
  }
}

inline void unpack_steps(const float* data, size_t n, uint32_t* steps) {
  for (size_t i = 0; i < n; ++i)
    steps[i] = static_cast<uint32_t>(data[2 * n + i]) | (static_cast<uint32_t>(data[3 * n + i]) << 16);
}

// After the header checks: throws through who.state_error unless data[0, size(n)) are an Adam
// state's moments and step counters.
inline void check_data(const OptimizerBase& who, const float* data) {
  const size_t n = who.n_params();
  for (size_t i = 0; i < 2 * n; ++i)
    if (!std::isfinite(data[i])) who.state_error("moment " + std::to_string(i) + " is not finite");
  for (size_t i = 2 * n; i < 4 * n; ++i) {
    const float x = data[i];
    if (!(x >= 0.0f && x < 65536.0f && std::floor(x) == x))
      who.state_error("step counter part " + std::to_string(i - 2 * n) + " (" + std::to_string(x) +
                      ") is not an integer in [0, 65535]");
  }
}

}  // namespace tinyfuse::adam_state
