// An integer tuning knob read from the environment, for developer builds' measurements
// (-DTINYFUSE_DEVELOPER_KNOBS=ON; callers read it only there, once).
#pragma once

#include <cstdlib>
#include <string>

#include "tinyfuse/errors.h"

namespace tinyfuse::cuda {

// `fallback` where `name` is unset or empty; its value where it is an integer in [lo, hi]; else a
// ConfigError naming the knob and the range.
inline long developer_knob(const char* name, long lo, long hi, long fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > hi)
    throw ConfigError(name, v, "environment tuning knob out of range", std::to_string(lo) + " .. " + std::to_string(hi));
  return x;
}

}  // namespace tinyfuse::cuda
