// Composite encoding on the CPU (tiny-cuda-nn's, and the "NRC" preset, which is one): nested
// encodings, each reading its own range of input dims, with outputs concatenated (default) or
// reduced by Sum or Product. The parts are built through build_encoding with `backend` (the
// CPU's), so any CPU encoding nests.
#pragma once

#include <memory>
#include <string>

#include "core/encodings/build_encoding.h"

namespace tinyfuse::cpu {

template <typename T>
std::unique_ptr<Encoding> make_composite_encoding(const CompositeSpec& spec, const std::string& path, uint32_t n_dims,
                                                  const EncodingBackend& backend);

}  // namespace tinyfuse::cpu
