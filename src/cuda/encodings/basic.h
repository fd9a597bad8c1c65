// The parameter-free CUDA encodings (Identity, Frequency, TriangleWave, OneBlob,
// SphericalHarmonics, Empty), one file each, built from their checked configs.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/encodings/basic_config.h"
#include "cuda/encodings/gpu_encoding.h"
#include "cuda/fused/oneblob_input.h"

namespace tinyfuse::cuda {

std::unique_ptr<GpuEncoding> make_identity_encoding(const IdentitySpec& spec, uint32_t n_dims, json hyperparams);
std::unique_ptr<GpuEncoding> make_frequency_encoding(const FrequencySpec& spec, uint32_t n_dims);
std::unique_ptr<GpuEncoding> make_triangle_wave_encoding(const TriangleWaveSpec& spec, uint32_t n_dims);
std::unique_ptr<GpuEncoding> make_oneblob_encoding(const OneBlobSpec& spec, uint32_t n_dims);
std::unique_ptr<GpuEncoding> make_spherical_harmonics_encoding(const SphericalHarmonicsSpec& spec);
std::unique_ptr<GpuEncoding> make_empty_encoding(uint32_t n_dims);

// `encoding` as the fused OneBlob inference kernel reads it (fused/oneblob_input.h): `input`'s
// positions and the bin count, where `encoding` is a CUDA OneBlob with FP16 features, no padding,
// a multiple of 8 bins (at least 8) and at most fused::kOneBlobMaxDims inputs; nullopt otherwise.
// `input` is checked as the encoding's inference() checks it.
std::optional<fused::OneBlobInput> fused_oneblob_input(const Encoding& encoding, const TensorView& input);

}  // namespace tinyfuse::cuda
