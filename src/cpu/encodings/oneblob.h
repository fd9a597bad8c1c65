// OneBlob encoding on the CPU (tiny-cuda-nn's, with its quartic kernel): per input dim n_bins
// features, the share of a kernel of radius 1/n_bins around x in each bin of [0, 1) (wrapping).
#pragma once

#include <memory>

#include "core/encodings/basic_config.h"
#include "tinyfuse/encoding.h"

namespace tinyfuse::cpu {

template <typename T>
std::unique_ptr<Encoding> make_oneblob_encoding(const OneBlobSpec& spec, uint32_t n_dims);

}  // namespace tinyfuse::cpu
