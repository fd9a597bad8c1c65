// Reading the configs of the parameter-free one-value-at-a-time encodings (Identity, Frequency,
// TriangleWave, OneBlob, SphericalHarmonics, Empty) into device-neutral specs, with tiny-cuda-nn's
// keys and defaults. Every rule is checked here once so all backends accept the same configs.
#pragma once

#include <cstdint>
#include <string>

#include "core/config_reader.h"
#include "tinyfuse/object.h"

namespace tinyfuse {

struct IdentitySpec {
  float scale = 1.0f, offset = 0.0f;  // out = in * scale + offset
};

struct FrequencySpec {
  uint32_t n_frequencies = 12;  // output width: 2 * n_frequencies per input dim
};

struct TriangleWaveSpec {
  uint32_t n_frequencies = 12;  // output width: n_frequencies per input dim
};

struct OneBlobSpec {
  uint32_t n_bins = 16;  // a power of two; output width: n_bins per input dim
};

struct SphericalHarmonicsSpec {
  uint32_t degree = 4;  // 1..8; output width degree^2; input must be 3-D
};

// `path` names the config in errors ("encoding", "encoding.nested[1]"); `n_input_dims` is what
// the encoding is built for.
IdentitySpec parse_identity_config(const json& config, const std::string& path);
FrequencySpec parse_frequency_config(const json& config, const std::string& path);
TriangleWaveSpec parse_triangle_wave_config(const json& config, const std::string& path);
OneBlobSpec parse_oneblob_config(const json& config, const std::string& path);
SphericalHarmonicsSpec parse_spherical_harmonics_config(const json& config, const std::string& path,
                                                        uint32_t n_input_dims);
void parse_empty_config(const json& config, const std::string& path);

// The rules shared with the NRC preset. `n_bins`: a power of two in [1, 1024];
// `n_frequencies`: an integer in [1, 64].
uint32_t read_oneblob_bins(const ConfigReader& reader, uint32_t fallback);
uint32_t read_n_frequencies(const ConfigReader& reader, uint32_t fallback);

}  // namespace tinyfuse
