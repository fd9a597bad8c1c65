// Evaluating a trained image model at every pixel, and comparing pictures.
#pragma once

#include "jobs/image.h"
#include "tinyfuse/object.h"

namespace tinyfuse::cli {

// Rows per inference call when rendering.
constexpr int64_t kRenderChunkRows = int64_t{1} << 16;

// Runs model.inference at the centre of every pixel of a width x height image (positions in
// [0, 1]^2 as in training), in chunks of at most `max_chunk` rows so that large images need
// little memory; a chunk whose inference runs out of memory (OutOfMemoryError, nothing changed)
// is retried in halves, down to single rows. Values are not clamped.
jobs::Image render_model(DifferentiableObject& model, int width, int height, int64_t max_chunk = kRenderChunkRows);

// Peak signal-to-noise ratio in dB of `image` (clamped to [0, 1]) against `reference`, peak 1.
// Both must have the same size. Infinite for identical pictures.
double psnr(const jobs::Image& image, const jobs::Image& reference);

}  // namespace tinyfuse::cli
