#include "cpu/encodings/make_encoding.h"

#include "core/config_reader.h"
#include "core/encodings/basic_config.h"
#include "cpu/encodings/grid.h"
#include "cpu/encodings/identity.h"
#include "cpu/encodings/composite.h"
#include "cpu/encodings/empty.h"
#include "cpu/encodings/frequency.h"
#include "cpu/encodings/oneblob.h"
#include "cpu/encodings/spherical_harmonics.h"
#include "cpu/encodings/triangle_wave.h"

namespace tinyfuse::cpu {

const std::vector<std::string>& encoding_otypes() {
  static const std::vector<std::string> names = {"Identity", "Grid", "HashGrid", "DenseGrid", "TiledGrid",
                                                 "Frequency", "TriangleWave", "OneBlob", "SphericalHarmonics", "Empty",
                                                 "Composite", "NRC", "OneBlobFrequency"};
  return names;
}

template <typename T>
std::unique_ptr<Encoding> make_encoding(const json& config, const std::string& path, uint32_t n_input_dims) {
  json c = config;
  if (c.is_object() && !c.contains("otype")) c["otype"] = "OneBlob";  // tiny-cuda-nn's default
  const std::string otype = read_otype(c, path, encoding_otypes());
  if (n_input_dims == 0) throw ConfigError(path + ".n_input_dims", "0", "an encoding needs at least one input", ">= 1");
  if (otype == "Identity") {
    const IdentitySpec spec = parse_identity_config(c, path);
    json hp = {{"otype", otype}, {"scale", spec.scale}, {"offset", spec.offset}};
    return make_identity_encoding<T>(n_input_dims, spec.scale, spec.offset, hp);
  }
  if (otype == "Grid" || otype == "HashGrid" || otype == "DenseGrid" || otype == "TiledGrid")
    return make_grid_encoding<T>(parse_grid_config(c, path, n_input_dims));
  if (otype == "Frequency") return make_frequency_encoding<T>(c, path, n_input_dims);
  if (otype == "TriangleWave") return make_triangle_wave_encoding<T>(c, path, n_input_dims);
  if (otype == "OneBlob") return make_oneblob_encoding<T>(c, path, n_input_dims);
  if (otype == "SphericalHarmonics") return make_spherical_harmonics_encoding<T>(c, path, n_input_dims);
  if (otype == "Empty") return make_empty_encoding<T>(c, path, n_input_dims);
  if (otype == "Composite") return make_composite_encoding<T>(c, path, n_input_dims);
  if (otype == "NRC" || otype == "OneBlobFrequency") return make_nrc_encoding<T>(c, path, n_input_dims);
  throw ConfigError(path + ".otype", "\"" + otype + "\"", "no CPU implementation", join(encoding_otypes()));
}

template std::unique_ptr<Encoding> make_encoding<float>(const json&, const std::string&, uint32_t);
template std::unique_ptr<Encoding> make_encoding<double>(const json&, const std::string&, uint32_t);

}  // namespace tinyfuse::cpu
