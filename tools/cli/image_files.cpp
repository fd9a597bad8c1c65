#include "image_files.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <stb_image.h>
#include <stb_image_write.h>

#include "core/atomic_file.h"
#include "core/file_read.h"
#include "core/host_memory.h"

namespace tinyfuse::cli {

jobs::Image load_image(const std::string& path) {
  const std::string what = "image '" + path + "'";
  const std::string bytes = read_regular_file(path, kMaxImageFileBytes, what, "the CLI's limit for image files");
  const auto* data_in = reinterpret_cast<const unsigned char*>(bytes.data());
  const int size = static_cast<int>(bytes.size());  // at most kMaxImageFileBytes
  int w = 0, h = 0, channels = 0;
  if (!stbi_info_from_memory(data_in, size, &w, &h, &channels)) {
    const char* why = stbi_failure_reason();
    throw std::runtime_error("cannot read " + what + ": " + (why ? why : "unknown reason"));
  }
  // The decoded bytes and the float picture, checked before stb_image allocates either.
  checked_bytes({w, h, 3 * (1 + int64_t{sizeof(float)})}, "the pixels of " + what);
  unsigned char* data = stbi_load_from_memory(data_in, size, &w, &h, &channels, 3);
  if (!data) {
    const char* why = stbi_failure_reason();
    throw std::runtime_error("cannot read " + what + ": " + (why ? why : "unknown reason"));
  }
  jobs::Image image(w, h);
  for (size_t i = 0; i < image.rgb.size(); ++i) image.rgb[i] = data[i] / 255.0f;
  stbi_image_free(data);
  return image;
}

namespace {
void append_bytes(void* context, void* data, int size) {
  auto* out = static_cast<std::vector<unsigned char>*>(context);
  const auto* bytes = static_cast<const unsigned char*>(data);
  out->insert(out->end(), bytes, bytes + size);
}
}  // namespace

void save_png(const jobs::Image& image, const std::string& path) {
  std::vector<unsigned char> pixels(image.rgb.size());
  for (size_t i = 0; i < pixels.size(); ++i) {
    const float v = std::isfinite(image.rgb[i]) ? std::clamp(image.rgb[i], 0.0f, 1.0f) : 0.0f;
    pixels[i] = static_cast<unsigned char>(std::lround(v * 255.0f));
  }
  std::vector<unsigned char> png;
  if (!stbi_write_png_to_func(append_bytes, &png, image.width, image.height, 3, pixels.data(), image.width * 3))
    throw std::runtime_error("cannot encode PNG for '" + path + "'");
  write_file_atomic(path, png.data(), png.size(), "learn-image");
}

}  // namespace tinyfuse::cli
