#include "core/encodings/grid_config.h"

#include <cmath>
#include <limits>

#include "core/config_reader.h"

namespace tinyfuse {

const std::vector<std::string>& grid_otypes() {
  static const std::vector<std::string> names = {"Grid", "HashGrid", "DenseGrid", "TiledGrid"};
  return names;
}

std::string to_string(GridType t) {
  switch (t) {
    case GridType::Hash: return "Hash";
    case GridType::Dense: return "Dense";
    case GridType::Tiled: return "Tiled";
  }
  return "?";
}

std::string to_string(GridHash h) {
  switch (h) {
    case GridHash::Prime: return "Prime";
    case GridHash::CoherentPrime: return "CoherentPrime";
    case GridHash::ReversedPrime: return "ReversedPrime";
    case GridHash::Rng: return "Rng";
    case GridHash::BaseConvert: return "BaseConvert";
  }
  return "?";
}

std::string to_string(GridInterpolation i) {
  switch (i) {
    case GridInterpolation::Nearest: return "Nearest";
    case GridInterpolation::Linear: return "Linear";
    case GridInterpolation::Smoothstep: return "Smoothstep";
  }
  return "?";
}

namespace {

// base^exponent, saturating at 2^64 - 1.
uint64_t ipow(uint64_t base, uint32_t exponent) {
  uint64_t r = 1;
  for (uint32_t i = 0; i < exponent; ++i)
    r = base != 0 && r > std::numeric_limits<uint64_t>::max() / base ? std::numeric_limits<uint64_t>::max() : r * base;
  return r;
}

}  // namespace

void resolve_grid_layout(GridSpec& spec, const std::string& path) {
  const uint32_t D = spec.n_dims;
  const float log2_scale = std::log2(spec.per_level_scale);
  spec.level_scale.assign(spec.n_levels, 0.0f);
  spec.level_resolution.assign(spec.n_levels, 0);
  spec.level_offset.assign(spec.n_levels + 1, 0);
  uint64_t offset = 0;
  for (uint32_t l = 0; l < spec.n_levels; ++l) {
    const float scale = grid_level_scale(l, log2_scale, spec.base_resolution);
    // ceil(scale) + 1 must fit uint32 (the kernels' vertex arithmetic).
    if (!std::isfinite(scale) || scale >= 4294967040.0f)
      throw ConfigError(path + ".per_level_scale", json(spec.per_level_scale).dump(),
                        "level " + std::to_string(l) + " would need a resolution beyond 2^32 (scale " +
                            json(scale).dump() + ")",
                        "fewer levels, a smaller base_resolution or a smaller per_level_scale");
    // A negative scale (per_level_scale < 1 shrinking a level below one cell) has no grid, and
    // ceil(scale) would not convert to uint32 (found by fuzz/fuzz_config.cpp).
    if (scale < 0.0f)
      throw ConfigError(path + ".per_level_scale", json(spec.per_level_scale).dump(),
                        "level " + std::to_string(l) + " would have a negative scale (base_resolution * per_level_scale^" +
                            std::to_string(l) + " - 1 = " + json(scale).dump() + ")",
                        "per_level_scale >= 1, or base_resolution * per_level_scale^(n_levels - 1) >= 1");
    const uint32_t res = grid_level_resolution(scale);
    spec.level_scale[l] = scale;
    spec.level_resolution[l] = res;

    // Vertices of a dense level, capped at 2^31 - 1 (tiny-cuda-nn compares res^D in double),
    // rounded up to a multiple of 8 for aligned accesses; then each type's limit.
    const uint32_t max_params = std::numeric_limits<uint32_t>::max() / 2;
    uint64_t entries = std::pow(static_cast<double>(res), static_cast<double>(D)) > static_cast<double>(max_params)
                           ? max_params
                           : ipow(res, D);
    entries = next_multiple<uint64_t>(entries, 8);
    if (spec.type == GridType::Tiled) entries = std::min(entries, ipow(spec.base_resolution, D));
    if (spec.type == GridType::Hash) entries = std::min<uint64_t>(entries, uint64_t(1) << spec.log2_hashmap_size);

    spec.level_offset[l] = static_cast<uint32_t>(offset);
    offset += entries;
    if (offset * spec.n_features_per_level > std::numeric_limits<uint32_t>::max())
      throw ConfigError(path, "(" + to_string(spec.type) + " grid, " + std::to_string(spec.n_levels) + " levels)",
                        "needs more than 2^32 - 1 parameters (level " + std::to_string(l) + " has resolution " +
                            std::to_string(res) + "), beyond tiny-cuda-nn's uint32 parameter offsets",
                        "fewer levels, lower resolutions, or a Hash grid with a smaller log2_hashmap_size");
  }
  spec.level_offset[spec.n_levels] = static_cast<uint32_t>(offset);
}

GridSpec parse_grid_config(const json& config, const std::string& path, uint32_t n_input_dims) {
  const std::string otype = read_otype(config, path, grid_otypes());
  ConfigReader r(config, path,
                 {"type", "n_levels", "n_features", "n_grid_features", "n_features_per_level", "log2_hashmap_size",
                  "base_resolution", "per_level_scale", "interpolation", "hash", "stochastic_interpolation",
                  "deterministic", "fixed_point_pos"});
  if (n_input_dims < 1 || n_input_dims > kGridMaxDims)
    throw ConfigError(path + ".n_input_dims", std::to_string(n_input_dims),
                      "grid encodings encode 1 to 4 input dimensions", "1, 2, 3, 4");

  GridSpec spec;
  spec.n_dims = n_input_dims;

  // The aliases only change the default storage type, as in tiny-cuda-nn; "type" overrides it.
  const std::string default_type = otype == "DenseGrid" ? "Dense" : otype == "TiledGrid" ? "Tiled" : "Hash";
  const std::string type = r.get_choice("type", default_type, {"Hash", "Dense", "Tiled", "Tile"});
  spec.type = type == "Hash" ? GridType::Hash : type == "Dense" ? GridType::Dense : GridType::Tiled;

  spec.n_features_per_level = r.get_uint("n_features_per_level", 2, 1, 8);
  const uint32_t F = spec.n_features_per_level;
  if (F != 1 && F != 2 && F != 4 && F != 8) r.fail("n_features_per_level", "must be a power of two up to 8", "1, 2, 4, 8");

  // n_features (or n_grid_features) = n_levels * F may replace n_levels.
  const char* features_key = r.has("n_features") ? "n_features" : r.has("n_grid_features") ? "n_grid_features" : nullptr;
  if (features_key) {
    if (r.has("n_features") && r.has("n_grid_features"))
      r.fail("n_grid_features", "n_features and n_grid_features are the same setting; give one", "one of them");
    if (r.has("n_levels"))
      r.fail(features_key, "n_levels and " + std::string(features_key) + " determine each other; give one",
             "n_levels, or " + std::string(features_key) + " = n_levels * n_features_per_level");
    const uint32_t n_features = r.get_uint(features_key, 0, F, kGridMaxLevels * F);
    if (n_features % F != 0)
      r.fail(features_key, "must be a multiple of n_features_per_level (" + std::to_string(F) + ")",
             "n_levels * n_features_per_level");
    spec.n_levels = n_features / F;
  } else {
    spec.n_levels = r.get_uint("n_levels", 16, 1, kGridMaxLevels);
  }

  spec.log2_hashmap_size = r.get_uint("log2_hashmap_size", 19, 0, 31);
  spec.base_resolution = r.get_uint("base_resolution", 16, 1, std::numeric_limits<uint32_t>::max() / 2);

  // Dense grids default to growing from base_resolution to 256 over the levels, as in
  // tiny-cuda-nn (computed in float). With one level the growth is irrelevant; tiny-cuda-nn
  // divides by zero there, tinyfuse uses 2.
  float default_scale = 2.0f;
  if (spec.type == GridType::Dense && spec.n_levels > 1)
    default_scale = std::exp(std::log(256.0f / static_cast<float>(spec.base_resolution)) /
                             static_cast<float>(spec.n_levels - 1));
  const double pls = r.get_number("per_level_scale", default_scale, 0.0, 1e30);
  if (!(pls > 0)) r.fail("per_level_scale", "must be positive", "a finite number > 0");
  spec.per_level_scale = static_cast<float>(pls);
  if (!(spec.per_level_scale > 0) || !std::isfinite(spec.per_level_scale))
    r.fail("per_level_scale", "does not fit a float", "a number in (1e-38, 3e38)");

  const std::string interp = r.get_choice("interpolation", "Linear", {"Nearest", "Linear", "Smoothstep"});
  spec.interpolation = interp == "Nearest"  ? GridInterpolation::Nearest
                       : interp == "Linear" ? GridInterpolation::Linear
                                            : GridInterpolation::Smoothstep;

  const std::string hash =
      r.get_choice("hash", "CoherentPrime", {"Prime", "CoherentPrime", "ReversedPrime", "Rng", "BaseConvert"});
  spec.hash = hash == "Prime"           ? GridHash::Prime
              : hash == "CoherentPrime" ? GridHash::CoherentPrime
              : hash == "ReversedPrime" ? GridHash::ReversedPrime
              : hash == "Rng"           ? GridHash::Rng
                                        : GridHash::BaseConvert;

  spec.stochastic_interpolation = r.get_bool("stochastic_interpolation", false);
  spec.deterministic = r.get_bool("deterministic", false);
  spec.fixed_point_pos = r.get_bool("fixed_point_pos", false);

  resolve_grid_layout(spec, path);
  return spec;
}

json grid_hyperparams(const GridSpec& spec) {
  json hp = {
      {"otype", "Grid"},
      {"type", to_string(spec.type)},
      {"n_levels", spec.n_levels},
      {"n_features_per_level", spec.n_features_per_level},
      {"base_resolution", spec.base_resolution},
      {"per_level_scale", spec.per_level_scale},
      {"interpolation", to_string(spec.interpolation)},
      {"hash", to_string(spec.hash)},
      {"stochastic_interpolation", spec.stochastic_interpolation},
      {"deterministic", spec.deterministic},
      {"fixed_point_pos", spec.fixed_point_pos},
  };
  if (spec.type == GridType::Hash) hp["log2_hashmap_size"] = spec.log2_hashmap_size;
  return hp;
}

std::vector<ParamSegment> grid_param_segments(const GridSpec& spec) {
  std::vector<ParamSegment> segs;
  const size_t F = spec.n_features_per_level;
  for (uint32_t l = 0; l < spec.n_levels; ++l)
    segs.push_back({spec.level_offset[l] * F, spec.level_table_size(l) * F, ParamSegment::Kind::Grid, 0, 0});
  return segs;
}

void fill_uniform_tcnn_order(Pcg32& rng, size_t n, float* out, float lo, float hi) {
  const size_t per_thread = 4, block = 128;
  const size_t launched = next_multiple((n + per_thread - 1) / per_thread, block);
  const float range = hi - lo;
  Pcg32 gen = rng;
  for (size_t i = 0; i < launched; ++i)
    for (size_t j = 0; j < per_thread; ++j) {
      const float u = gen.next_float();  // draw 4i + j
      const size_t idx = i + launched * j;
      if (idx < n) out[idx] = std::fma(u, range, lo);  // the GPU fuses u * range + lo
    }
  for (size_t k = 0; k < n; ++k) rng.next_uint();
}

void grid_initialize_params(const GridSpec& spec, Pcg32& rng, float* params_host, float scale) {
  fill_uniform_tcnn_order(rng, spec.n_params(), params_host, -1e-4f * scale, 1e-4f * scale);
}

}  // namespace tinyfuse
