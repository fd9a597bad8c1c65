// Composite encoding on the CPU (tiny-cuda-nn's): nested encodings, each reading its own range of
// input dims, with outputs concatenated (default) or reduced by Sum or Product; and the "NRC"
// preset built from it. The parts are built through make_encoding, so any CPU encoding nests.
#pragma once

#include <memory>
#include <string>

#include "tinyfuse/encoding.h"

namespace tinyfuse::cpu {

template <typename T>
std::unique_ptr<Encoding> make_composite_encoding(const json& config, const std::string& path, uint32_t n_dims);

// otype "NRC" / "OneBlobFrequency".
template <typename T>
std::unique_ptr<Encoding> make_nrc_encoding(const json& config, const std::string& path, uint32_t n_dims);

}  // namespace tinyfuse::cpu
