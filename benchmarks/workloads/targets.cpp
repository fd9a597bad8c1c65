#include "workloads/targets.h"

#include <algorithm>
#include <cmath>

#include "jobs/image.h"
#include "jobs/test_pattern.h"  // learn-image's built-in picture

namespace tinyfuse::bench {

namespace {

constexpr float kPi = 3.14159265358979f;

float radiance(const float* in, int c) {
  const float* p = in;
  const float d = 2.0f * in[3 + c] - 1.0f;
  return 0.5f + 0.25f * std::sin(2.0f * kPi * (2.0f * p[c] + p[(c + 1) % 3])) +
         0.1f * std::sin(16.0f * kPi * (p[0] + p[1] + p[2])) + 0.1f * d;
}

float sdf(const float* p) {
  const float sx = p[0] - 0.4f, sy = p[1] - 0.5f, sz = p[2] - 0.5f;
  const float sphere = std::sqrt(sx * sx + sy * sy + sz * sz) - 0.25f;
  const float tx = p[0] - 0.65f, ty = p[1] - 0.5f, tz = p[2] - 0.5f;
  const float ring = std::sqrt(tx * tx + ty * ty) - 0.2f;
  const float torus = std::sqrt(ring * ring + tz * tz) - 0.06f;
  return std::min(sphere, torus);
}

const jobs::Image& test_pattern() {
  static const jobs::Image image = jobs::make_test_pattern(256);
  return image;
}

class ImageField final : public TargetField {
 public:
  void sample(Pcg32& rng, int64_t n, float* input, float* target) const override {
    for (int64_t i = 0; i < 2 * n; ++i) input[i] = rng.next_float();
    if (target) target_values(TargetKind::Image, input, n, target);
  }
};

class RadianceField final : public TargetField {
 public:
  void sample(Pcg32& rng, int64_t n, float* input, float* target) const override {
    for (int64_t i = 0; i < n; ++i) {
      float* x = input + 6 * i;
      for (int k = 0; k < 3; ++k) x[k] = rng.next_float();
      const float z = 2.0f * rng.next_float() - 1.0f, phi = 2.0f * kPi * rng.next_float();
      const float r = std::sqrt(std::max(0.0f, 1.0f - z * z));
      x[3] = 0.5f * (r * std::cos(phi) + 1.0f);
      x[4] = 0.5f * (r * std::sin(phi) + 1.0f);
      x[5] = 0.5f * (z + 1.0f);
    }
    if (target) target_values(TargetKind::Radiance, input, n, target);
  }
};

class SdfField final : public TargetField {
 public:
  void sample(Pcg32& rng, int64_t n, float* input, float* target) const override {
    for (int64_t i = 0; i < 3 * n; ++i) input[i] = rng.next_float();
    if (target) target_values(TargetKind::Sdf, input, n, target);
  }
};

}  // namespace

std::unique_ptr<TargetField> make_target_field(TargetKind kind) {
  switch (kind) {
    case TargetKind::Image: return std::make_unique<ImageField>();
    case TargetKind::Radiance: return std::make_unique<RadianceField>();
    case TargetKind::Sdf: return std::make_unique<SdfField>();
  }
  return nullptr;
}

void target_values(TargetKind kind, const float* input, int64_t n, float* target) {
  switch (kind) {
    case TargetKind::Image:
      jobs::sample_bilinear(test_pattern(), input, n, target);
      return;
    case TargetKind::Radiance:
      for (int64_t i = 0; i < n; ++i)
        for (int c = 0; c < 3; ++c) target[3 * i + c] = radiance(input + 6 * i, c);
      return;
    case TargetKind::Sdf:
      for (int64_t i = 0; i < n; ++i) target[i] = sdf(input + 3 * i);
      return;
  }
}

}  // namespace tinyfuse::bench
