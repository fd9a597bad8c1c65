// Composite encoding on CUDA (tiny-cuda-nn's, and the "NRC" preset, which is one): nested
// encodings, each reading its own range of input dims, with outputs concatenated (default) or
// reduced by Sum or Product. Same layout and semantics as on the CPU (the layout is core's,
// core/encodings/composite_layout.h); the parts are built through build_encoding with `backend`.
#pragma once

#include <memory>
#include <string>

#include "core/encodings/build_encoding.h"

namespace tinyfuse::cuda {

std::unique_ptr<Encoding> make_composite_encoding(const CompositeSpec& spec, const std::string& path, uint32_t n_dims,
                                                  const EncodingBackend& backend);

}  // namespace tinyfuse::cuda
