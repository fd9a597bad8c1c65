#include "core/encodings/basic_config.h"

#include "core/encodings/spherical_harmonics_math.h"

namespace tinyfuse {

uint32_t read_oneblob_bins(const ConfigReader& r, uint32_t fallback) {
  const uint32_t n = r.get_uint("n_bins", fallback, 1, 1024);
  if ((n & (n - 1)) != 0) r.fail("n_bins", "must be a power of two", "1, 2, 4, 8, ..., 1024");
  return n;
}

uint32_t read_n_frequencies(const ConfigReader& r, uint32_t fallback) {
  return r.get_uint("n_frequencies", fallback, 1, 64);
}

IdentitySpec parse_identity_config(const json& config, const std::string& path) {
  ConfigReader r(config, path, {"scale", "offset"});
  IdentitySpec s;
  s.scale = static_cast<float>(r.get_number("scale", 1.0, -1e30, 1e30));
  s.offset = static_cast<float>(r.get_number("offset", 0.0, -1e30, 1e30));
  return s;
}

FrequencySpec parse_frequency_config(const json& config, const std::string& path) {
  ConfigReader r(config, path, {"n_frequencies"});
  FrequencySpec s;
  s.n_frequencies = read_n_frequencies(r, s.n_frequencies);
  return s;
}

TriangleWaveSpec parse_triangle_wave_config(const json& config, const std::string& path) {
  ConfigReader r(config, path, {"n_frequencies"});
  TriangleWaveSpec s;
  s.n_frequencies = read_n_frequencies(r, s.n_frequencies);
  return s;
}

OneBlobSpec parse_oneblob_config(const json& config, const std::string& path) {
  ConfigReader r(config, path, {"n_bins"});
  OneBlobSpec s;
  s.n_bins = read_oneblob_bins(r, s.n_bins);
  return s;
}

SphericalHarmonicsSpec parse_spherical_harmonics_config(const json& config, const std::string& path,
                                                        uint32_t n_input_dims) {
  ConfigReader r(config, path, {"degree"});
  SphericalHarmonicsSpec s;
  s.degree = r.get_uint("degree", s.degree, 1, kMaxShDegree);
  if (n_input_dims != 3)
    throw ConfigError(r.key_path("n_input_dims"), std::to_string(n_input_dims),
                      "SphericalHarmonics encodes 3-D directions (components in [0, 1])", "3");
  return s;
}

void parse_empty_config(const json& config, const std::string& path) { ConfigReader r(config, path, {}); }

}  // namespace tinyfuse
