// The built-in target image of learn-image: fine detail of several kinds to show what a network
// can and cannot represent.
#pragma once

#include "jobs/image.h"

namespace tinyfuse::jobs {

// A `size` x `size` picture over a smooth colour gradient: concentric rings whose spacing shrinks
// outwards (to about 5 pixels at 256), a checkerboard of 8-pixel squares (at 256), a disc with a thin
// outline, a triangle, a square of diagonal stripes and the word "tinyfuse". Supersampled 4x4.
Image make_test_pattern(int size = 256);

}  // namespace tinyfuse::jobs
