// The CUDA backend's half of building encodings: which CUDA object each otype's checked spec
// becomes. Reading the otype and the config is core's (core/encodings/build_encoding.h).
#include "cuda/encodings/make_encoding.h"

#include "core/encodings/build_encoding.h"
#include "cuda/encodings/basic.h"
#include "cuda/encodings/composite.h"
#include "cuda/encodings/grid_encoding.h"

namespace tinyfuse::cuda {

namespace {

class CudaEncodings final : public EncodingBackend {
 public:
  Device device() const override { return Device::CUDA; }
  std::unique_ptr<Encoding> identity(const IdentitySpec& spec, uint32_t n_dims, json hyperparams) const override {
    return make_identity_encoding(spec, n_dims, std::move(hyperparams));
  }
  std::unique_ptr<Encoding> grid(const GridSpec& spec) const override { return make_grid_encoding(spec); }
  std::unique_ptr<Encoding> frequency(const FrequencySpec& spec, uint32_t n_dims) const override {
    return make_frequency_encoding(spec, n_dims);
  }
  std::unique_ptr<Encoding> triangle_wave(const TriangleWaveSpec& spec, uint32_t n_dims) const override {
    return make_triangle_wave_encoding(spec, n_dims);
  }
  std::unique_ptr<Encoding> oneblob(const OneBlobSpec& spec, uint32_t n_dims) const override {
    return make_oneblob_encoding(spec, n_dims);
  }
  std::unique_ptr<Encoding> spherical_harmonics(const SphericalHarmonicsSpec& spec) const override {
    return make_spherical_harmonics_encoding(spec);
  }
  std::unique_ptr<Encoding> empty(uint32_t n_dims) const override { return make_empty_encoding(n_dims); }
  std::unique_ptr<Encoding> composite(const CompositeSpec& spec, const std::string& path, uint32_t n_dims) const override {
    return make_composite_encoding(spec, path, n_dims, *this);
  }
};

}  // namespace

std::unique_ptr<Encoding> make_encoding(const json& config, const std::string& path, uint32_t n_input_dims) {
  return build_encoding(config, path, n_input_dims, CudaEncodings());
}

}  // namespace tinyfuse::cuda
