// Image files: PNG/JPEG and the other formats stb_image reads, to and from jobs::Image.
#pragma once

#include <cstdint>
#include <string>

#include "jobs/image.h"

namespace tinyfuse::cli {

// Image files larger than this are refused before they are read.
constexpr uint64_t kMaxImageFileBytes = uint64_t{1} << 30;

// Any format stb_image reads (PNG, JPEG, BMP, TGA, ...); alpha is dropped, 8-bit values map to
// [0, 1] as stored (no colour-space conversion). Only regular files of at most
// kMaxImageFileBytes are read, and a picture whose pixels cannot fit in memory is refused
// (OutOfMemoryError) before it is decoded. Throws std::runtime_error or tinyfuse::Error.
jobs::Image load_image(const std::string& path);

// 8-bit RGB PNG (values clamped to [0, 1]), written atomically.
void save_png(const jobs::Image& image, const std::string& path);

}  // namespace tinyfuse::cli
