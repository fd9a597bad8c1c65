// The parameter-free CUDA encodings (Identity, Frequency, TriangleWave, OneBlob,
// SphericalHarmonics, Empty), one file each, built from their checked configs.
#pragma once

#include <memory>
#include <string>

#include "core/encodings/basic_config.h"
#include "cuda/encodings/gpu_encoding.h"

namespace tinyfuse::cuda {

std::unique_ptr<GpuEncoding> make_identity_encoding(const IdentitySpec& spec, uint32_t n_dims, json hyperparams);
std::unique_ptr<GpuEncoding> make_frequency_encoding(const FrequencySpec& spec, uint32_t n_dims);
std::unique_ptr<GpuEncoding> make_triangle_wave_encoding(const TriangleWaveSpec& spec, uint32_t n_dims);
std::unique_ptr<GpuEncoding> make_oneblob_encoding(const OneBlobSpec& spec, uint32_t n_dims);
std::unique_ptr<GpuEncoding> make_spherical_harmonics_encoding(const SphericalHarmonicsSpec& spec);
std::unique_ptr<GpuEncoding> make_empty_encoding(uint32_t n_dims);

}  // namespace tinyfuse::cuda
