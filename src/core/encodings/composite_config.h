// Reading a Composite encoding config (and tiny-cuda-nn's "NRC" preset, which is a Composite)
// into a device-neutral spec: which input dims each nested encoding reads and how the nested
// outputs are combined. The nested configs themselves are parsed by whoever builds the parts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tinyfuse/object.h"

namespace tinyfuse {

enum class ReductionType { Concatenation, Sum, Product };

// Canonical spellings, matched case-insensitively: Concatenation, Sum, Product.
const std::vector<std::string>& reduction_names();
std::string to_string(ReductionType reduction);

struct CompositePartSpec {
  json config;          // the nested encoding's config, without n_dims_to_encode / dims_to_encode_begin
  std::string path;     // where it sat ("encoding.nested[1]"), for messages
  uint32_t n_dims = 0;  // how many input dims it encodes ...
  uint32_t begin = 0;   // ... starting at this one
};

struct CompositeSpec {
  ReductionType reduction = ReductionType::Concatenation;
  // In config order. As in tiny-cuda-nn, entries that encode 0 dims are dropped.
  std::vector<CompositePartSpec> parts;
};

// tiny-cuda-nn's rules: each entry of "nested" may give "n_dims_to_encode"; one entry may leave
// it out and takes the dims the others leave (n_input_dims minus their sum, which must not
// exceed n_input_dims). Entries read consecutive dims unless one gives "dims_to_encode_begin"
// (then every entry must give n_dims_to_encode, and later entries continue after it).
// "reduction": Concatenation (default), Sum or Product.
CompositeSpec parse_composite_config(const json& config, const std::string& path, uint32_t n_input_dims);

// tiny-cuda-nn's "NRC" (alias "OneBlobFrequency") encoding of neural radiance caching: a
// Composite of TriangleWave (n_frequencies, default 12) on dims 0-2, OneBlob (n_bins, default 4)
// on dims 3-7 and Identity on the remaining dims. Needs at least 8 input dims.
struct NrcSpec {
  uint32_t n_frequencies = 12;
  uint32_t n_bins = 4;
};
NrcSpec parse_nrc_config(const json& config, const std::string& path, uint32_t n_input_dims);
// The Composite config the preset stands for.
json nrc_composite_config(const NrcSpec& spec);

}  // namespace tinyfuse
