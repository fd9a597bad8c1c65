#include "cuda/encodings/make_encoding.h"

#include "core/config_reader.h"
#include "core/encodings/basic_config.h"
#include "core/encodings/grid_config.h"
#include "cuda/encodings/basic.h"
#include "cuda/encodings/composite.h"
#include "cuda/encodings/grid_encoding.h"

namespace tinyfuse::cuda {

const std::vector<std::string>& encoding_otypes() {
  static const std::vector<std::string> names = {"Identity", "Grid", "HashGrid", "DenseGrid", "TiledGrid",
                                                 "Frequency", "TriangleWave", "OneBlob", "SphericalHarmonics", "Empty",
                                                 "Composite", "NRC", "OneBlobFrequency"};
  return names;
}

std::unique_ptr<Encoding> make_encoding(const json& config, const std::string& path, uint32_t n_input_dims) {
  json c = config;
  if (c.is_object() && !c.contains("otype")) c["otype"] = "OneBlob";  // tiny-cuda-nn's default
  const std::string otype = read_otype(c, path, encoding_otypes());
  if (n_input_dims == 0) throw ConfigError(path + ".n_input_dims", "0", "an encoding needs at least one input", ">= 1");
  if (otype == "Identity") {
    const IdentitySpec spec = parse_identity_config(c, path);
    return make_identity_encoding(spec, n_input_dims, {{"otype", otype}, {"scale", spec.scale}, {"offset", spec.offset}});
  }
  if (otype == "Grid" || otype == "HashGrid" || otype == "DenseGrid" || otype == "TiledGrid")
    return make_grid_encoding(parse_grid_config(c, path, n_input_dims));
  if (otype == "Frequency") return make_frequency_encoding(parse_frequency_config(c, path), n_input_dims);
  if (otype == "TriangleWave") return make_triangle_wave_encoding(parse_triangle_wave_config(c, path), n_input_dims);
  if (otype == "OneBlob") return make_oneblob_encoding(parse_oneblob_config(c, path), n_input_dims);
  if (otype == "SphericalHarmonics")
    return make_spherical_harmonics_encoding(parse_spherical_harmonics_config(c, path, n_input_dims));
  if (otype == "Empty") {
    parse_empty_config(c, path);
    return make_empty_encoding(n_input_dims);
  }
  if (otype == "Composite") return make_composite_encoding(c, path, n_input_dims);
  if (otype == "NRC" || otype == "OneBlobFrequency") return make_nrc_encoding(c, path, n_input_dims);
  throw ConfigError(path + ".otype", "\"" + otype + "\"", "no CUDA implementation", join(encoding_otypes()));
}

}  // namespace tinyfuse::cuda
