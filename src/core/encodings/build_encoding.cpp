#include "core/encodings/build_encoding.h"

#include "core/config_reader.h"
#include "core/otypes.h"

namespace tinyfuse {

std::unique_ptr<Encoding> build_encoding(const json& config, const std::string& path, uint32_t n_input_dims,
                                         const EncodingBackend& backend) {
  json c = config;
  if (c.is_object() && !c.contains("otype")) c["otype"] = "OneBlob";  // tiny-cuda-nn's default
  const std::string otype = read_otype(c, path, otype_names(ObjectKind::Encoding));
  if (n_input_dims == 0) throw ConfigError(path + ".n_input_dims", "0", "an encoding needs at least one input", ">= 1");
  const Device device = backend.device();
  if (!otype_built_on(ObjectKind::Encoding, otype, device))
    throw ConfigError(path + ".otype", "\"" + otype + "\"", otype_unavailable_reason(ObjectKind::Encoding, otype, device),
                      join(otype_names_built_on(ObjectKind::Encoding, device)));
  if (otype == "Identity") {
    const IdentitySpec spec = parse_identity_config(c, path);
    return backend.identity(spec, n_input_dims, {{"otype", otype}, {"scale", spec.scale}, {"offset", spec.offset}});
  }
  if (otype == "Grid" || otype == "HashGrid" || otype == "DenseGrid" || otype == "TiledGrid")
    return backend.grid(parse_grid_config(c, path, n_input_dims));
  if (otype == "Frequency") return backend.frequency(parse_frequency_config(c, path), n_input_dims);
  if (otype == "TriangleWave") return backend.triangle_wave(parse_triangle_wave_config(c, path), n_input_dims);
  if (otype == "OneBlob") return backend.oneblob(parse_oneblob_config(c, path), n_input_dims);
  if (otype == "SphericalHarmonics")
    return backend.spherical_harmonics(parse_spherical_harmonics_config(c, path, n_input_dims));
  if (otype == "Empty") {
    parse_empty_config(c, path);
    return backend.empty(n_input_dims);
  }
  if (otype == "Composite") return backend.composite(parse_composite_config(c, path, n_input_dims), path, n_input_dims);
  if (otype == "NRC" || otype == "OneBlobFrequency") {
    const NrcSpec nrc = parse_nrc_config(c, path, n_input_dims);
    return backend.composite(parse_composite_config(nrc_composite_config(nrc), path, n_input_dims), path, n_input_dims);
  }
  throw Error("internal: the otype table lists encoding " + otype + " but build_encoding has no case for it");
}

}  // namespace tinyfuse
