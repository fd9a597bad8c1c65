#include "cpu/encodings/make_encoding.h"

#include "core/config_reader.h"
#include "cpu/encodings/identity.h"

namespace tinyfuse::cpu {

const std::vector<std::string>& encoding_otypes() {
  static const std::vector<std::string> names = {"Identity"};
  return names;
}

template <typename T>
std::unique_ptr<Encoding> make_encoding(const json& config, const std::string& path, uint32_t n_input_dims) {
  json c = config;
  if (c.is_object() && !c.contains("otype")) c["otype"] = "OneBlob";  // tiny-cuda-nn's default
  const std::string otype = read_otype(c, path, encoding_otypes());
  if (n_input_dims == 0) throw ConfigError(path + ".n_input_dims", "0", "an encoding needs at least one input", ">= 1");
  if (otype == "Identity") {
    ConfigReader r(c, path, {"scale", "offset"});
    const float scale = static_cast<float>(r.get_number("scale", 1.0, -1e30, 1e30));
    const float offset = static_cast<float>(r.get_number("offset", 0.0, -1e30, 1e30));
    json hp = {{"otype", otype}, {"scale", scale}, {"offset", offset}};
    return make_identity_encoding<T>(n_input_dims, scale, offset, hp);
  }
  throw ConfigError(path + ".otype", "\"" + otype + "\"", "no CPU implementation", join(encoding_otypes()));
}

template std::unique_ptr<Encoding> make_encoding<float>(const json&, const std::string&, uint32_t);
template std::unique_ptr<Encoding> make_encoding<double>(const json&, const std::string&, uint32_t);

}  // namespace tinyfuse::cpu
