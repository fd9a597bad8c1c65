#include "core/encodings/composite_config.h"

#include "core/config_reader.h"
#include "core/json_text.h"
#include "core/encodings/basic_config.h"

namespace tinyfuse {

namespace {

constexpr const char* kDimsKey = "n_dims_to_encode";
constexpr const char* kBeginKey = "dims_to_encode_begin";

std::string short_text(const json& j) { return json_excerpt(j, 80); }

}  // namespace

const std::vector<std::string>& reduction_names() {
  static const std::vector<std::string> names = {"Concatenation", "Sum", "Product"};
  return names;
}

std::string to_string(ReductionType reduction) {
  switch (reduction) {
    case ReductionType::Sum: return "Sum";
    case ReductionType::Product: return "Product";
    default: return "Concatenation";
  }
}

CompositeSpec parse_composite_config(const json& config, const std::string& path, uint32_t n_input_dims) {
  ConfigReader r(config, path, {"nested", "reduction"});
  CompositeSpec spec;
  const std::string reduction = r.get_choice("reduction", "Concatenation", reduction_names());
  spec.reduction = reduction == "Sum" ? ReductionType::Sum
                   : reduction == "Product" ? ReductionType::Product
                                            : ReductionType::Concatenation;

  const std::string accepted = "an array of encoding configs, each optionally with n_dims_to_encode";
  if (!r.has("nested")) r.fail("nested", "required key is missing", accepted);
  const json& nested = r.raw("nested");
  if (!nested.is_array()) r.fail("nested", "must be an array", accepted);
  if (nested.empty()) r.fail("nested", "must hold at least one encoding config", accepted);

  const std::string dims_range = "an integer in [0, " + std::to_string(n_input_dims) + "]";
  struct Entry {
    bool has_dims = false, has_begin = false;
    uint32_t dims = 0, begin = 0;
  };
  std::vector<Entry> entries(nested.size());
  bool any_begin = false;
  uint64_t total = 0;
  for (size_t i = 0; i < nested.size(); ++i) {
    const std::string entry_path = r.key_path("nested[" + std::to_string(i) + "]");
    if (!nested[i].is_object())
      throw ConfigError(entry_path, short_text(nested[i]), "must be a JSON object", "an encoding config");
    // Only these two keys are read here; the nested encoding checks the rest of its config.
    json placement = json::object();
    for (const char* key : {kDimsKey, kBeginKey})
      if (nested[i].contains(key)) placement[key] = nested[i].at(key);
    ConfigReader pr(placement, entry_path, {kDimsKey, kBeginKey});
    Entry& e = entries[i];
    e.has_dims = pr.has(kDimsKey);
    e.has_begin = pr.has(kBeginKey);
    e.dims = pr.get_uint(kDimsKey, 0, 0, n_input_dims);
    e.begin = pr.get_uint(kBeginKey, 0, 0, n_input_dims);
    any_begin = any_begin || e.has_begin;
    total += e.dims;
  }
  if (!any_begin && total > n_input_dims)
    throw ConfigError(r.key_path("nested"), "n_dims_to_encode summing to " + std::to_string(total),
                      "nested encodings must not encode more dims than the composite's " +
                          std::to_string(n_input_dims) + " input dims",
                      "n_dims_to_encode summing to at most " + std::to_string(n_input_dims));

  bool remainder_free = !any_begin;
  size_t remainder_taker = 0;
  uint32_t offset = 0;
  for (size_t i = 0; i < nested.size(); ++i) {
    const Entry& e = entries[i];
    const std::string entry_path = r.key_path("nested[" + std::to_string(i) + "]");
    uint32_t dims = e.dims;
    if (e.has_dims) {
      if (e.has_begin) offset = e.begin;
    } else {
      if (!remainder_free)
        throw ConfigError(entry_path + "." + kDimsKey, "(missing)",
                          any_begin ? "required when any nested encoding sets dims_to_encode_begin"
                                    : "only one nested encoding may leave it unspecified (nested[" +
                                          std::to_string(remainder_taker) + "] already takes the remaining dims)",
                          dims_range);
      dims = n_input_dims - static_cast<uint32_t>(total);
      remainder_free = false;
      remainder_taker = i;
    }
    if (static_cast<uint64_t>(offset) + dims > n_input_dims)
      throw ConfigError(entry_path + "." + kBeginKey, std::to_string(offset),
                        "dims [" + std::to_string(offset) + ", " + std::to_string(offset + dims) +
                            ") run past the composite's " + std::to_string(n_input_dims) + " input dims",
                        "dims_to_encode_begin + n_dims_to_encode <= " + std::to_string(n_input_dims));
    if (dims > 0) {
      CompositePartSpec part;
      part.config = nested[i];
      part.config.erase(kDimsKey);
      part.config.erase(kBeginKey);
      part.path = entry_path;
      part.n_dims = dims;
      part.begin = offset;
      spec.parts.push_back(std::move(part));
    }
    offset += dims;
  }
  return spec;
}

NrcSpec parse_nrc_config(const json& config, const std::string& path, uint32_t n_input_dims) {
  ConfigReader r(config, path, {"n_frequencies", "n_bins"});
  NrcSpec spec;
  spec.n_frequencies = read_n_frequencies(r, spec.n_frequencies);
  spec.n_bins = read_oneblob_bins(r, spec.n_bins);
  if (n_input_dims < 8)
    throw ConfigError(r.key_path("n_input_dims"), std::to_string(n_input_dims),
                      "NRC encodes dims 0-2 (position) with TriangleWave and dims 3-7 with OneBlob", ">= 8");
  return spec;
}

json nrc_composite_config(const NrcSpec& spec) {
  return {{"otype", "Composite"},
          {"nested",
           {{{"otype", "TriangleWave"}, {kDimsKey, 3}, {"n_frequencies", spec.n_frequencies}},
            {{"otype", "OneBlob"}, {kDimsKey, 5}, {"n_bins", spec.n_bins}},
            {{"otype", "Identity"}}}}};
}

}  // namespace tinyfuse
