// The CPU backend's half of building encodings: which CPU object each otype's checked spec
// becomes. Reading the otype and the config is core's (core/encodings/build_encoding.h).
#include "cpu/encodings/make_encoding.h"

#include "core/encodings/build_encoding.h"
#include "cpu/encodings/composite.h"
#include "cpu/encodings/empty.h"
#include "cpu/encodings/frequency.h"
#include "cpu/encodings/grid.h"
#include "cpu/encodings/identity.h"
#include "cpu/encodings/oneblob.h"
#include "cpu/encodings/spherical_harmonics.h"
#include "cpu/encodings/triangle_wave.h"

namespace tinyfuse::cpu {

namespace {

template <typename T>
class CpuEncodings final : public EncodingBackend {
 public:
  Device device() const override { return Device::CPU; }
  std::unique_ptr<Encoding> identity(const IdentitySpec& spec, uint32_t n_dims, json hyperparams) const override {
    return make_identity_encoding<T>(n_dims, spec.scale, spec.offset, std::move(hyperparams));
  }
  std::unique_ptr<Encoding> grid(const GridSpec& spec) const override { return make_grid_encoding<T>(spec); }
  std::unique_ptr<Encoding> frequency(const FrequencySpec& spec, uint32_t n_dims) const override {
    return make_frequency_encoding<T>(spec, n_dims);
  }
  std::unique_ptr<Encoding> triangle_wave(const TriangleWaveSpec& spec, uint32_t n_dims) const override {
    return make_triangle_wave_encoding<T>(spec, n_dims);
  }
  std::unique_ptr<Encoding> oneblob(const OneBlobSpec& spec, uint32_t n_dims) const override {
    return make_oneblob_encoding<T>(spec, n_dims);
  }
  std::unique_ptr<Encoding> spherical_harmonics(const SphericalHarmonicsSpec& spec) const override {
    return make_spherical_harmonics_encoding<T>(spec);
  }
  std::unique_ptr<Encoding> empty(uint32_t n_dims) const override { return make_empty_encoding<T>(n_dims); }
  std::unique_ptr<Encoding> composite(const CompositeSpec& spec, const std::string& path, uint32_t n_dims) const override {
    return make_composite_encoding<T>(spec, path, n_dims, *this);
  }
};

}  // namespace

template <typename T>
std::unique_ptr<Encoding> make_encoding(const json& config, const std::string& path, uint32_t n_input_dims) {
  return build_encoding(config, path, n_input_dims, CpuEncodings<T>());
}

template std::unique_ptr<Encoding> make_encoding<float>(const json&, const std::string&, uint32_t);
template std::unique_ptr<Encoding> make_encoding<double>(const json&, const std::string&, uint32_t);

}  // namespace tinyfuse::cpu
