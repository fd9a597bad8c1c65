// Building an encoding from its config, once for every backend: the otype is read against the
// otype table, the config parsed and checked (core/encodings/*_config), and the backend asked
// for the object by the spec it got. A Composite builds its parts through the same function with
// the same backend, so any encoding nests on any device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/encodings/basic_config.h"
#include "core/encodings/composite_config.h"
#include "core/encodings/grid_config.h"
#include "tinyfuse/encoding.h"

namespace tinyfuse {

// What a backend builds, one call per otype, from a checked spec.
class EncodingBackend {
 public:
  virtual ~EncodingBackend() = default;
  virtual Device device() const = 0;
  virtual std::unique_ptr<Encoding> identity(const IdentitySpec& spec, uint32_t n_dims, json hyperparams) const = 0;
  virtual std::unique_ptr<Encoding> grid(const GridSpec& spec) const = 0;
  virtual std::unique_ptr<Encoding> frequency(const FrequencySpec& spec, uint32_t n_dims) const = 0;
  virtual std::unique_ptr<Encoding> triangle_wave(const TriangleWaveSpec& spec, uint32_t n_dims) const = 0;
  virtual std::unique_ptr<Encoding> oneblob(const OneBlobSpec& spec, uint32_t n_dims) const = 0;
  virtual std::unique_ptr<Encoding> spherical_harmonics(const SphericalHarmonicsSpec& spec) const = 0;
  virtual std::unique_ptr<Encoding> empty(uint32_t n_dims) const = 0;
  // Composite and NRC (a Composite preset); `path` names the config in messages.
  virtual std::unique_ptr<Encoding> composite(const CompositeSpec& spec, const std::string& path, uint32_t n_dims) const = 0;
};

// `path` names the config in errors ("encoding", "encoding.nested[1]"). A config without
// "otype" is tiny-cuda-nn's default, OneBlob. Throws ConfigError.
std::unique_ptr<Encoding> build_encoding(const json& config, const std::string& path, uint32_t n_input_dims,
                                         const EncodingBackend& backend);

}  // namespace tinyfuse
