// A trained signed-distance model as a field over the unit cube: its values and gradients at
// given points (evaluated in chunks), and a picture of three slices through it.
#pragma once

#include <cstdint>
#include <vector>

#include "jobs/image.h"
#include "sdf_source.h"
#include "tinyfuse/object.h"

namespace tinyfuse::cli {

// The model's first output at n points (n x 3, unit-cube coordinates), from the inference
// parameters.
std::vector<float> sdf_values(DifferentiableObject& model, const float* points, int64_t n);
// Its gradient with respect to the point (n x 3), from the inference parameters.
std::vector<float> sdf_gradients(DifferentiableObject& model, const float* points, int64_t n);

// Slices z = 0.5, y = 0.5 and x = 0.5 of the model's distance side by side, each size x size
// pixels: orange outside, blue inside, darker towards the surface, with bands every 0.04 of
// distance; the model's zero level set in black and, for a built-in shape, the exact one in white
// beneath it (it shows where they differ).
jobs::Image render_sdf_slices(DifferentiableObject& model, const SdfSource& source, int size = 256);

}  // namespace tinyfuse::cli
