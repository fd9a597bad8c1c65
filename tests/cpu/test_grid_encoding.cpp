// The CPU grid encodings (Hash, Dense, Tiled): parameter layout against an independently
// computed formula, forward values by hand and against a naive restatement of tiny-cuda-nn's
// lookup, FP64 finite-difference checks of input and parameter gradients, deterministic
// parameter gradients, initialisation order, padding, gradient modes and config errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

const BuildOptions kF64{Device::CPU, DType::F64};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

template <typename F>
ConfigError expect_config_error(F fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ConfigError";
  return ConfigError("", "", "", "");
}

// ---- An independent restatement of tiny-cuda-nn's grid layout and lookup ----

struct RefLayout {
  std::vector<float> scale;
  std::vector<uint64_t> resolution, entries, offset;  // offset in entries; one more than levels
  uint64_t total_params = 0;
};

uint64_t upow(uint64_t b, uint32_t e) {
  uint64_t r = 1;
  while (e--) r *= b;
  return r;
}

RefLayout ref_layout(const std::string& type, uint32_t dims, uint32_t levels, uint32_t features, uint32_t log2_size,
                     uint32_t base, float per_level_scale) {
  RefLayout L;
  uint64_t offset = 0;
  for (uint32_t l = 0; l < levels; ++l) {
    // tiny-cuda-nn: scale = 2^(l log2 s) base - 1 in float, resolution = ceil(scale) + 1.
    const float scale = std::exp2(float(l) * std::log2(per_level_scale)) * float(base) - 1.0f;
    const uint64_t res = uint64_t(std::ceil(scale)) + 1;
    uint64_t n = std::min<uint64_t>(upow(res, dims), (1ull << 31) - 1);
    n = (n + 7) / 8 * 8;
    if (type == "Tiled") n = std::min(n, upow(base, dims));
    if (type == "Hash") n = std::min(n, uint64_t(1) << log2_size);
    L.scale.push_back(scale);
    L.resolution.push_back(res);
    L.entries.push_back(n);
    L.offset.push_back(offset);
    offset += n;
  }
  L.offset.push_back(offset);
  L.total_params = offset * features;
  return L;
}

uint32_t ref_hash(const std::string& hash, const uint32_t* v, uint32_t dims) {
  const uint64_t primes[7] = {1958374283u, 2654435761u, 805459861u, 3674653429u, 2097192037u, 1434869437u, 2165219737u};
  uint64_t h = 0;
  if (hash == "Prime" || hash == "CoherentPrime") {
    for (uint32_t d = 0; d < dims; ++d) h ^= (uint64_t(v[d]) * (d == 0 && hash == "CoherentPrime" ? 1 : primes[d])) & 0xFFFFFFFFu;
  } else if (hash == "ReversedPrime") {
    for (uint32_t d = 0; d < dims; ++d) h ^= (uint64_t(v[d]) * primes[6 - d]) & 0xFFFFFFFFu;
  } else if (hash == "BaseConvert") {
    for (uint32_t d = 0; d < dims; ++d) h = ((h + v[d]) * 2531011u) & 0xFFFFFFFFu;
  } else if (hash == "Rng") {
    // The draw `v[0]` steps into PCG32 seeded with 1337 (only 1-D here: the step is the coordinate).
    EXPECT_EQ(dims, 1u);
    Pcg32 g(1337);
    for (uint32_t i = 0; i < v[0]; ++i) g.next_uint();
    h = g.next_uint();
  }
  return static_cast<uint32_t>(h);
}

uint32_t ref_entry(const std::string& type, const std::string& hash, uint64_t size, uint64_t res, const uint32_t* v,
                   uint32_t dims) {
  uint64_t index = 0, stride = 1;
  for (uint32_t d = 0; d < dims; ++d) {
    index += uint64_t(v[d]) * stride;
    stride *= res;
  }
  if (type == "Hash" && size < stride) return static_cast<uint32_t>(ref_hash(hash, v, dims) % size);
  return static_cast<uint32_t>((index & 0xFFFFFFFFu) % size);
}

struct GridCase {
  std::string type = "Hash", hash = "CoherentPrime", interp = "Linear";
  uint32_t dims = 2, levels = 3, features = 2, log2_size = 6, base = 4;
  float per_level_scale = 1.8f;
  json config() const {
    return {{"otype", "Grid"},       {"type", type},         {"n_levels", levels},
            {"n_features_per_level", features}, {"log2_hashmap_size", log2_size}, {"base_resolution", base},
            {"per_level_scale", per_level_scale}, {"interpolation", interp}, {"hash", hash}};
  }
  RefLayout layout() const { return ref_layout(type, dims, levels, features, log2_size, base, per_level_scale); }
};

// Where x falls in one level, as tiny-cuda-nn computes it (double arithmetic).
struct RefCell {
  uint32_t vertex[4];
  double w[4];
};

RefCell ref_cell(const GridCase& g, const double* x, float scale) {
  RefCell c{};
  for (uint32_t d = 0; d < g.dims; ++d) {
    const double p = double(scale) * x[d] + 0.5;
    const double fl = std::floor(p);
    c.vertex[d] = static_cast<uint32_t>(static_cast<int32_t>(fl));
    const double f = p - fl;
    c.w[d] = g.interp == "Smoothstep" ? f * f * (3.0 - 2.0 * f) : f;
  }
  return c;
}

// Vertex and weight of corner k of a cell.
double ref_corner(const GridCase& g, const RefCell& c, uint32_t k, uint32_t* v) {
  double w = 1.0;
  for (uint32_t d = 0; d < g.dims; ++d) {
    const bool up = (k >> d) & 1u;
    w *= up ? c.w[d] : 1.0 - c.w[d];
    v[d] = c.vertex[d] + (up ? 1 : 0);
  }
  return w;
}

size_t ref_param(const GridCase& g, const RefLayout& L, uint32_t level, const uint32_t* v) {
  return (L.offset[level] + ref_entry(g.type, g.hash, L.entries[level], L.resolution[level], v, g.dims)) * g.features;
}

std::vector<double> ref_forward(const GridCase& g, const std::vector<double>& params, const std::vector<double>& x,
                                int64_t batch) {
  const RefLayout L = g.layout();
  const uint32_t out_w = g.levels * g.features;
  std::vector<double> y(batch * out_w, 0.0);
  for (int64_t b = 0; b < batch; ++b)
    for (uint32_t l = 0; l < g.levels; ++l) {
      const RefCell c = ref_cell(g, &x[b * g.dims], L.scale[l]);
      uint32_t v[4];
      if (g.interp == "Nearest") {
        const size_t p = ref_param(g, L, l, c.vertex);
        for (uint32_t f = 0; f < g.features; ++f) y[b * out_w + l * g.features + f] = params[p + f];
        continue;
      }
      for (uint32_t k = 0; k < (1u << g.dims); ++k) {
        const double w = ref_corner(g, c, k, v);
        const size_t p = ref_param(g, L, l, v);
        for (uint32_t f = 0; f < g.features; ++f) y[b * out_w + l * g.features + f] += w * params[p + f];
      }
    }
  return y;
}

// Parameter gradients summed serially: level by level, record by record, corner by corner.
std::vector<double> ref_param_gradients(const GridCase& g, const std::vector<double>& x, const std::vector<double>& dy,
                                        int64_t batch, uint32_t dy_width) {
  const RefLayout L = g.layout();
  std::vector<double> grads(L.total_params, 0.0);
  for (uint32_t l = 0; l < g.levels; ++l)
    for (int64_t b = 0; b < batch; ++b) {
      const RefCell c = ref_cell(g, &x[b * g.dims], L.scale[l]);
      uint32_t v[4];
      for (uint32_t k = 0; k < (1u << g.dims); ++k) {
        const double w = ref_corner(g, c, k, v);
        const size_t p = ref_param(g, L, l, v);
        for (uint32_t f = 0; f < g.features; ++f) grads[p + f] += w * dy[b * dy_width + l * g.features + f];
      }
    }
  return grads;
}

// Random inputs in [0, 1) whose position at every level lies at least `margin` (in cell units)
// from a cell boundary. A finite difference whose step crosses a boundary measures the jump to
// other vertices (other table entries, a kink in the interpolation) rather than the derivative
// the backward pass computes inside the cell, so such points are drawn again.
std::vector<double> inputs_inside_cells(const GridCase& g, Pcg32& rng, int64_t batch, double margin = 1e-4) {
  const RefLayout L = g.layout();
  std::vector<double> x(batch * g.dims);
  for (auto& xi : x) {
    for (;;) {
      xi = rng.next_double();
      bool ok = true;
      for (float s : L.scale) {
        const double p = double(s) * xi + 0.5;
        const double f = p - std::floor(p);
        ok = ok && f > margin && f < 1.0 - margin;
      }
      if (ok) break;
    }
  }
  return x;
}

// An encoding with its own FP64 parameters (uniform in +-1, so values and gradients are O(1)).
struct Built {
  std::unique_ptr<Encoding> enc;
  std::vector<double> params, grads;
};

Built build(const GridCase& g, Pcg32& rng, uint32_t alignment = 1, const BuildOptions& opts = kF64) {
  Built r;
  r.enc = create_encoding(g.config(), g.dims, opts);
  r.enc->set_alignment(alignment);
  std::vector<float> init(r.enc->n_params());
  r.enc->initialize_params(rng, init.data(), 1e4f);  // +-1e-4 * 1e4
  r.params.assign(init.begin(), init.end());
  r.grads.assign(init.size(), 0.0);
  auto pv = TensorView::vector(r.params.data(), r.params.size());
  r.enc->set_params(pv, pv, TensorView::vector(r.grads.data(), r.grads.size()));
  return r;
}

TensorView mat(std::vector<double>& v, int64_t rows, int64_t cols) { return TensorView::matrix(v.data(), rows, cols); }

// ---- Layout ----

TEST(GridConfig, DefaultHashGridParameterCount) {
  // 3-D, 16 levels, 2 features, 2^19 entries, base 16, scale 2: levels 0-2 are dense (16^3,
  // 32^3, 64^3 vertices), levels 3-15 hashed: (4096 + 32768 + 262144 + 13 * 524288) * 2.
  auto enc = create_encoding({{"otype", "HashGrid"}}, 3);
  EXPECT_EQ(enc->n_params(), 14229504u);
  EXPECT_EQ(enc->output_width(), 32u);
  EXPECT_EQ(enc->padded_output_width(), 32u);
  EXPECT_EQ(enc->input_width(), 3u);
  EXPECT_EQ(enc->param_dtype(), DType::F32);
}

TEST(GridConfig, ParameterCountMatchesFormula) {
  for (std::string type : {"Hash", "Dense", "Tiled"})
    for (uint32_t dims = 1; dims <= 4; ++dims)
      for (uint32_t features : {1u, 2u, 4u, 8u})
        for (float pls : {1.5f, 2.0f, 1.3819f}) {
          GridCase g;
          g.type = type, g.dims = dims, g.features = features, g.per_level_scale = pls;
          g.levels = dims == 4 ? 4 : 6, g.base = 5, g.log2_size = 4 * dims + 1;
          auto enc = create_encoding(g.config(), dims);
          const RefLayout L = g.layout();
          ASSERT_EQ(enc->n_params(), L.total_params) << g.config().dump() << " dims " << dims;
          auto segs = enc->param_segments();
          ASSERT_EQ(segs.size(), g.levels);
          for (uint32_t l = 0; l < g.levels; ++l) {
            EXPECT_EQ(segs[l].kind, ParamSegment::Kind::Grid);
            EXPECT_EQ(segs[l].offset, L.offset[l] * features);
            EXPECT_EQ(segs[l].count, L.entries[l] * features);
          }
        }
}

TEST(GridConfig, AliasesAndDefaults) {
  auto hp = [](const json& cfg, uint32_t dims = 2) { return create_encoding(cfg, dims)->hyperparams(); };
  EXPECT_EQ(hp({{"otype", "HashGrid"}})["type"], "Hash");
  EXPECT_EQ(hp({{"otype", "densegrid"}})["type"], "Dense");
  EXPECT_EQ(hp({{"otype", "TiledGrid"}})["type"], "Tiled");
  EXPECT_EQ(hp({{"otype", "Grid"}, {"type", "tile"}})["type"], "Tiled");
  EXPECT_EQ(hp({{"otype", "DenseGrid"}, {"type", "Hash"}})["type"], "Hash");  // "type" overrides the alias
  json h = hp({{"otype", "Grid"}});
  EXPECT_EQ(h["otype"], "Grid");
  EXPECT_EQ(h["n_levels"], 16);
  EXPECT_EQ(h["n_features_per_level"], 2);
  EXPECT_EQ(h["log2_hashmap_size"], 19);
  EXPECT_EQ(h["base_resolution"], 16);
  EXPECT_EQ(h["per_level_scale"], 2.0);
  EXPECT_EQ(h["interpolation"], "Linear");
  EXPECT_EQ(h["hash"], "CoherentPrime");
  EXPECT_EQ(h["stochastic_interpolation"], false);
  EXPECT_EQ(h["deterministic"], false);
  EXPECT_EQ(hp({{"otype", "Grid"}, {"deterministic", true}})["deterministic"], true);
  // Dense grids grow from base_resolution to 256 over their levels: (256 / 16)^(1 / 15).
  EXPECT_NEAR(hp({{"otype", "DenseGrid"}})["per_level_scale"].get<double>(), std::pow(16.0, 1.0 / 15), 1e-6);
  EXPECT_FALSE(hp({{"otype", "DenseGrid"}}).contains("log2_hashmap_size"));
  // n_features is tiny-cuda-nn's alternative to n_levels.
  EXPECT_EQ(hp({{"otype", "Grid"}, {"n_features", 12}, {"n_features_per_level", 4}})["n_levels"], 3);
  // hyperparams() builds the same encoding again.
  for (const json& cfg : {json{{"otype", "HashGrid"}, {"hash", "Rng"}, {"interpolation", "Smoothstep"}},
                          json{{"otype", "DenseGrid"}, {"n_levels", 5}, {"base_resolution", 3}},
                          json{{"otype", "TiledGrid"}, {"stochastic_interpolation", true}}}) {
    auto a = create_encoding(cfg, 3);
    auto b = create_encoding(a->hyperparams(), 3);
    EXPECT_EQ(a->n_params(), b->n_params()) << cfg.dump();
    EXPECT_EQ(a->hyperparams(), b->hyperparams()) << cfg.dump();
  }
  for (const std::string& name : {"Grid", "HashGrid", "DenseGrid", "TiledGrid"}) {
    const auto names = encoding_otypes();
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

TEST(GridConfig, Errors) {
  auto err = [](json cfg, uint32_t dims = 2) {
    cfg["otype"] = cfg.value("otype", "Grid");
    return expect_config_error([&] { create_encoding(cfg, dims); });
  };
  for (uint32_t dims : {5u, 7u}) {
    auto e = err(json::object(), dims);
    EXPECT_EQ(e.key(), "encoding.n_input_dims") << e.what();
    EXPECT_TRUE(contains(e.accepted(), "1, 2, 3, 4")) << e.what();
  }
  auto f = err({{"n_features_per_level", 3}});
  EXPECT_EQ(f.key(), "encoding.n_features_per_level");
  EXPECT_EQ(f.accepted(), "1, 2, 4, 8");
  EXPECT_EQ(err({{"n_features_per_level", 16}}).key(), "encoding.n_features_per_level");
  auto t = err({{"type", "Octree"}});
  EXPECT_EQ(t.key(), "encoding.type");
  EXPECT_TRUE(contains(t.accepted(), "Dense")) << t.what();
  auto h = err({{"hash", "CoherentPrimes"}});
  EXPECT_EQ(h.key(), "encoding.hash");
  EXPECT_TRUE(contains(h.rule(), "did you mean \"CoherentPrime\"")) << h.what();
  EXPECT_TRUE(contains(h.accepted(), "BaseConvert")) << h.what();
  EXPECT_EQ(err({{"interpolation", "Cubic"}}).key(), "encoding.interpolation");
  auto u = err({{"n_level", 8}});
  EXPECT_EQ(u.key(), "encoding.n_level");
  EXPECT_TRUE(contains(u.rule(), "did you mean \"n_levels\"")) << u.what();
  EXPECT_EQ(err({{"n_levels", 0}}).key(), "encoding.n_levels");
  EXPECT_EQ(err({{"n_levels", 129}}).key(), "encoding.n_levels");
  EXPECT_EQ(err({{"n_levels", 4}, {"n_features", 8}}).key(), "encoding.n_features");
  EXPECT_EQ(err({{"n_features", 7}}).key(), "encoding.n_features");
  EXPECT_EQ(err({{"per_level_scale", 0}}).key(), "encoding.per_level_scale");
  EXPECT_EQ(err({{"per_level_scale", -2}}).key(), "encoding.per_level_scale");
  EXPECT_EQ(err({{"per_level_scale", 1e9}, {"n_levels", 4}}).key(), "encoding.per_level_scale");  // resolution > 2^32
  EXPECT_EQ(err({{"base_resolution", 0}}).key(), "encoding.base_resolution");
  EXPECT_EQ(err({{"log2_hashmap_size", 32}}).key(), "encoding.log2_hashmap_size");
  EXPECT_EQ(err({{"stochastic_interpolation", 1}}).key(), "encoding.stochastic_interpolation");
  // 3-D dense levels of 2048^3 vertices are capped at 2^31 entries each, but 2 of them at 2
  // features overflow tiny-cuda-nn's uint32 parameter offsets.
  auto big = err({{"otype", "DenseGrid"}, {"n_levels", 2}, {"base_resolution", 2048}, {"per_level_scale", 1.0}}, 3);
  EXPECT_EQ(big.key(), "encoding") << big.what();
  EXPECT_TRUE(contains(big.rule(), "2^32")) << big.what();
}

// ---- Forward ----

TEST(GridEncoding, ForwardMatchesHandComputation1D) {
  // One dense level, base 4: scale 3, 4 vertices, table rounded up to 8 entries of 2 features.
  // Parameter 2e + f holds 10e + f.
  for (std::string interp : {"Linear", "Smoothstep", "Nearest"}) {
    auto enc = create_encoding({{"otype", "DenseGrid"}, {"n_levels", 1}, {"base_resolution", 4}, {"interpolation", interp}},
                               1, kF64);
    ASSERT_EQ(enc->n_params(), 16u);
    enc->set_alignment(8);
    ASSERT_EQ(enc->padded_output_width(), 8u);
    std::vector<double> params(16);
    for (int e = 0; e < 8; ++e)
      for (int f = 0; f < 2; ++f) params[2 * e + f] = 10 * e + f;
    auto pv = TensorView::vector(params.data(), 16);
    enc->set_params(pv, pv, TensorView{});
    // x = 0.3: position 0.3 * 3 + 0.5 = 1.4, between vertices 1 and 2, 0.4 of the way.
    // x = 0.9: position 3.2, between vertices 3 and 4; vertex 4 is past the last vertex and
    // reads entry 4 of the 8-entry table (tiny-cuda-nn's wraparound, modulo the table size).
    std::vector<double> x = {0.3, 0.9}, y(16, -7.0);
    enc->inference(mat(x, 2, 1), mat(y, 2, 8));
    auto w = [&](double t) { return interp == "Smoothstep" ? t * t * (3 - 2 * t) : t; };
    for (int f = 0; f < 2; ++f) {
      const double y0 = interp == "Nearest" ? 10 + f : (1 - w(0.4)) * (10 + f) + w(0.4) * (20 + f);
      const double y1 = interp == "Nearest" ? 30 + f : (1 - w(0.2)) * (30 + f) + w(0.2) * (40 + f);
      EXPECT_NEAR(y[f], y0, 1e-12) << interp;
      EXPECT_NEAR(y[8 + f], y1, 1e-12) << interp;
    }
    for (int j = 2; j < 8; ++j) {
      EXPECT_EQ(y[j], 0.0) << "padding of grid encodings is 0";
      EXPECT_EQ(y[8 + j], 0.0);
    }
    // dy/dx = scale * (upper - lower) * interpolation slope; Linear: 3 * 10.
    std::vector<double> dy(16, 0.0), dx(2, -1.0);
    dy[0] = 1;  // d y[0][feature 0]
    dy[9] = 1;  // d y[1][feature 1]
    auto ctx = enc->forward(mat(x, 2, 1), nullptr);
    auto dxv = mat(dx, 2, 1);
    enc->backward(*ctx, mat(x, 2, 1), mat(y, 2, 8), mat(dy, 2, 8), &dxv, false, GradientMode::Ignore);
    auto slope = [&](double t) { return interp == "Nearest" ? 0.0 : interp == "Smoothstep" ? 6 * t * (1 - t) : 1.0; };
    EXPECT_NEAR(dx[0], 3 * 10 * slope(0.4), 1e-9) << interp;
    EXPECT_NEAR(dx[1], 3 * 10 * slope(0.2), 1e-9) << interp;
  }
}

TEST(GridEncoding, ForwardMatchesNaiveReference) {
  Pcg32 rng(3);
  const char* hashes[] = {"Prime", "CoherentPrime", "ReversedPrime", "BaseConvert", "Rng"};
  for (std::string type : {"Hash", "Dense", "Tiled"})
    for (uint32_t dims = 1; dims <= 4; ++dims)
      for (std::string interp : {"Linear", "Smoothstep", "Nearest"})
        for (const char* hash : hashes) {
          if (std::string(hash) == "Rng" && dims > 1) continue;  // the reference steps PCG32 naively
          GridCase g;
          g.type = type, g.dims = dims, g.interp = interp, g.hash = hash;
          g.features = 1u << (dims % 4), g.log2_size = 2 * dims + 1, g.base = 3;
          auto b = build(g, rng);
          const int64_t batch = 40;
          std::vector<double> x(batch * dims);
          // Also outside [0, 1) (vertex coordinates wrap around), except for Rng, whose
          // reference steps PCG32 once per unit of the coordinate.
          const double lo = std::string(hash) == "Rng" ? 0.0 : -0.1;
          for (auto& xi : x) xi = lo + (1.1 - lo) * rng.next_double();
          std::vector<double> y(batch * b.enc->padded_output_width());
          b.enc->inference(mat(x, batch, dims), mat(y, batch, b.enc->padded_output_width()));
          const auto ref = ref_forward(g, b.params, x, batch);
          double err = 0;
          for (size_t i = 0; i < ref.size(); ++i) err = std::max(err, std::abs(y[i] - ref[i]));
          EXPECT_LT(err, 1e-12) << g.config().dump() << " dims " << dims;
        }
}

TEST(GridEncoding, FloatAgreesWithDoubleReference) {
  Pcg32 rng(9);
  GridCase g;
  g.dims = 3, g.levels = 6, g.features = 4, g.log2_size = 10, g.base = 8, g.per_level_scale = 1.5f;
  auto d = build(g, rng);
  auto f = create_encoding(g.config(), 3);
  std::vector<float> pf(d.params.begin(), d.params.end());
  f->set_params(TensorView::vector(pf.data(), pf.size()), TensorView::vector(pf.data(), pf.size()), TensorView{});
  const int64_t batch = 500;
  auto x = inputs_inside_cells(g, rng, batch, 1e-3);
  std::vector<float> xf(x.begin(), x.end()), yf(batch * 24);
  std::vector<double> xd(xf.begin(), xf.end()), yd(batch * 24);
  f->inference(TensorView::matrix(xf.data(), batch, 3), TensorView::matrix(yf.data(), batch, 24));
  d.enc->inference(mat(xd, batch, 3), mat(yd, batch, 24));
  double num = 0, den = 0;
  for (size_t i = 0; i < yd.size(); ++i) num += (yf[i] - yd[i]) * (yf[i] - yd[i]), den += yd[i] * yd[i];
  EXPECT_LT(std::sqrt(num / den), 1e-5);
}

// ---- Gradients by finite differences (FP64) ----

class GridGradients : public ::testing::TestWithParam<std::tuple<std::string, uint32_t, std::string, int64_t>> {};

TEST_P(GridGradients, MatchFiniteDifferences) {
  const auto& [type, dims, interp, batch] = GetParam();
  GridCase g;
  g.type = type, g.dims = dims, g.interp = interp;
  // Features and hash rotate through their values across the cases; small tables make the
  // finer levels hashed (Hash) or wrapped (Tiled, base 3) while level 0 stays dense.
  const uint32_t features[] = {1, 2, 4, 8};
  const char* hashes[] = {"CoherentPrime", "Prime", "ReversedPrime", "BaseConvert", "Rng"};
  g.features = features[(dims + type.size() + interp.size()) % 4];
  g.hash = hashes[(dims + batch) % 5];
  g.levels = 3, g.base = type == "Tiled" ? 3 : 4, g.per_level_scale = 1.8f, g.log2_size = 3 * dims;
  Pcg32 rng(1000 * dims + batch + type.size() * 7 + interp.size());
  auto b = build(g, rng, batch == 7 ? 16 : 1);  // batch 7 also exercises output padding
  const uint32_t out_w = b.enc->padded_output_width(), real_w = b.enc->output_width();
  auto x = inputs_inside_cells(g, rng, batch);
  std::vector<double> weights(batch * out_w);
  for (int64_t i = 0; i < batch; ++i)
    for (uint32_t j = 0; j < out_w; ++j) weights[i * out_w + j] = j < real_w ? 2 * rng.next_double() - 1 : 0.0;

  std::vector<double> y(batch * out_w);
  auto loss = [&] {
    b.enc->inference(mat(x, batch, dims), mat(y, batch, out_w));
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += weights[i] * y[i];
    return s;
  };
  auto yv = mat(y, batch, out_w);
  auto ctx = b.enc->forward(mat(x, batch, dims), &yv, false, true);
  std::vector<double> dx(batch * dims, -1.0);
  auto dxv = mat(dx, batch, dims);
  b.enc->backward(*ctx, mat(x, batch, dims), mat(y, batch, out_w), mat(weights, batch, out_w), &dxv, false,
                  GradientMode::Overwrite);

  const double h = 1e-6;
  auto numeric = [&](double& v) {
    const double saved = v;
    v = saved + h;
    const double up = loss();
    v = saved - h;
    const double down = loss();
    v = saved;
    return (up - down) / (2 * h);
  };
  auto error = [](double a, double n) { return std::abs(a - n) / std::max(1.0, std::abs(n)); };

  double max_in = 0, max_param = 0;
  for (int i = 0; i < 24; ++i) {
    const size_t k = rng.next_uint() % x.size();
    if (interp == "Nearest") EXPECT_EQ(dx[k], 0.0) << "Nearest lookups have no input gradient";
    max_in = std::max(max_in, error(dx[k], numeric(x[k])));
  }
  // Half the checked parameters are ones the batch touched, half are drawn from all.
  std::vector<size_t> touched;
  for (size_t i = 0; i < b.grads.size(); ++i)
    if (b.grads[i] != 0) touched.push_back(i);
  ASSERT_FALSE(touched.empty());
  for (int i = 0; i < 32; ++i) {
    const size_t k = i % 2 ? touched[rng.next_uint() % touched.size()] : rng.next_uint() % b.grads.size();
    max_param = std::max(max_param, error(b.grads[k], numeric(b.params[k])));
  }
  const std::string what = g.config().dump() + " dims " + std::to_string(dims) + " batch " + std::to_string(batch);
  EXPECT_LT(max_in, 1e-6) << what;
  EXPECT_LT(max_param, 1e-6) << what;
}

INSTANTIATE_TEST_SUITE_P(TypesDimsInterpolations, GridGradients,
                         ::testing::Combine(::testing::Values("Hash", "Dense", "Tiled"), ::testing::Values(1u, 2u, 3u, 4u),
                                            ::testing::Values("Linear", "Smoothstep", "Nearest"),
                                            ::testing::Values(1, 7, 256)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "d_" +
                                  std::get<2>(info.param) + "_batch" + std::to_string(std::get<3>(info.param));
                         });

// ---- Second derivatives (backward_backward_input) by finite differences (FP64) ----
//
// L2 = sum(v * dL/dx), dL/dx being backward()'s input gradient for dL/dy = g. dL/dx is linear in
// the parameters and in g, so central differences of L2 are exact up to rounding.

class GridSecondDerivatives : public ::testing::TestWithParam<std::tuple<std::string, uint32_t, std::string>> {};

TEST_P(GridSecondDerivatives, MatchFiniteDifferences) {
  const auto& [type, dims, interp] = GetParam();
  GridCase g;
  g.type = type, g.dims = dims, g.interp = interp;
  const uint32_t features[] = {1, 2, 4, 8};
  g.features = features[(dims + type.size()) % 4];
  g.levels = 3, g.base = type == "Tiled" ? 3 : 4, g.per_level_scale = 1.8f, g.log2_size = 3 * dims;
  const int64_t batch = 9;
  Pcg32 rng(500 * dims + type.size() * 3 + interp.size());
  auto b = build(g, rng, 16);  // padded to 16 columns: padding columns get no second-order gradient
  const uint32_t out_w = b.enc->padded_output_width(), real_w = b.enc->output_width();
  auto x = inputs_inside_cells(g, rng, batch);
  std::vector<double> dy(batch * out_w), v(batch * dims);
  for (int64_t i = 0; i < batch; ++i)
    for (uint32_t j = 0; j < out_w; ++j) dy[i * out_w + j] = j < real_w ? 2 * rng.next_double() - 1 : 0.0;
  for (auto& e : v) e = 2 * rng.next_double() - 1;

  std::vector<double> dx(batch * dims), scratch(b.grads.size());
  auto l2 = [&] {
    auto dxv = mat(dx, batch, dims);
    auto ctx = b.enc->forward(mat(x, batch, dims), nullptr);
    b.enc->backward(*ctx, mat(x, batch, dims), mat(dy, batch, out_w), mat(dy, batch, out_w), &dxv, false,
                    GradientMode::Ignore);
    double s = 0;
    for (size_t i = 0; i < dx.size(); ++i) s += v[i] * dx[i];
    return s;
  };
  std::vector<double> d_dy(batch * out_w, NAN), d_x(batch * dims, NAN);
  auto d_dyv = mat(d_dy, batch, out_w), d_xv = mat(d_x, batch, dims);
  std::fill(b.grads.begin(), b.grads.end(), NAN);
  auto ctx = b.enc->forward(mat(x, batch, dims), nullptr);
  b.enc->backward_backward_input(*ctx, mat(x, batch, dims), mat(v, batch, dims), mat(dy, batch, out_w), &d_dyv, &d_xv,
                                 false, GradientMode::Overwrite);

  const double h = 1e-3;  // L2 is linear in what is perturbed
  auto numeric = [&](double& e) {
    const double saved = e;
    e = saved + h;
    const double up = l2();
    e = saved - h;
    const double down = l2();
    e = saved;
    return (up - down) / (2 * h);
  };
  auto error = [](double a, double n) { return std::abs(a - n) / std::max(1.0, std::abs(n)); };
  double max_dy = 0, max_param = 0, largest = 0;
  for (int64_t i = 0; i < batch; ++i)
    for (uint32_t j = 0; j < out_w; ++j) {
      double& e = dy[i * out_w + j];
      const double a = d_dy[i * out_w + j];
      if (j >= real_w) {
        EXPECT_EQ(a, 0.0) << "padding column " << j;
        continue;
      }
      max_dy = std::max(max_dy, error(a, numeric(e)));
      largest = std::max(largest, std::abs(a));
    }
  std::vector<size_t> touched;
  for (size_t i = 0; i < b.grads.size(); ++i) {
    ASSERT_TRUE(std::isfinite(b.grads[i])) << "Overwrite must write every gradient";
    if (b.grads[i] != 0) touched.push_back(i);
  }
  for (int i = 0; i < 32 && !touched.empty(); ++i) {
    const size_t k = i % 2 ? touched[rng.next_uint() % touched.size()] : rng.next_uint() % b.grads.size();
    max_param = std::max(max_param, error(b.grads[k], numeric(b.params[k])));
  }
  // dL2/dx through the Hessian: L2 is multilinear in x for Linear, cubic for Smoothstep; a step of
  // 1e-6 keeps every level's position inside its cell (inputs_inside_cells' margin is 1e-4 of a
  // cell, and no level here has more than 13 cells per unit).
  double max_x = 0, largest_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double hx = 1e-6, saved = x[i];
    x[i] = saved + hx;
    const double up = l2();
    x[i] = saved - hx;
    const double down = l2();
    x[i] = saved;
    ASSERT_TRUE(std::isfinite(d_x[i])) << "dL2/dx must be written";
    max_x = std::max(max_x, error(d_x[i], (up - down) / (2 * hx)));
    largest_x = std::max(largest_x, std::abs(d_x[i]));
  }
  const std::string what = g.config().dump() + " dims " + std::to_string(dims);
  EXPECT_LT(max_dy, 1e-9) << what;
  EXPECT_LT(max_param, 1e-9) << what;
  EXPECT_LT(max_x, 1e-7) << what;
  if (interp == "Nearest") {
    EXPECT_EQ(largest, 0.0) << "Nearest lookups have no input gradient, so no second-order one";
    EXPECT_EQ(largest_x, 0.0);
    EXPECT_TRUE(touched.empty());
  } else if (dims > 1 || interp == "Smoothstep") {
    // (A 1-D Linear grid's input gradient is constant in each cell: its dL2/dx is 0.)
    EXPECT_GT(largest_x, 0.0) << what;
    EXPECT_GT(largest, 0.0) << what;
    EXPECT_FALSE(touched.empty()) << what;
  } else {
    EXPECT_GT(largest, 0.0) << what;
    EXPECT_FALSE(touched.empty()) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(TypesDimsInterpolations, GridSecondDerivatives,
                         ::testing::Combine(::testing::Values("Hash", "Dense", "Tiled"), ::testing::Values(1u, 2u, 3u, 4u),
                                            ::testing::Values("Linear", "Smoothstep", "Nearest")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "d_" +
                                  std::get<2>(info.param);
                         });

TEST(GridEncoding, SecondDerivativeModesAndErrors) {
  Pcg32 rng(31);
  GridCase g;
  auto b = build(g, rng);
  const int64_t batch = 20;
  auto x = inputs_inside_cells(g, rng, batch);
  std::vector<double> dy(batch * 6), v(batch * 2), out(batch * 6);
  for (auto& e : dy) e = 2 * rng.next_double() - 1;
  for (auto& e : v) e = 2 * rng.next_double() - 1;
  auto ctx = b.enc->forward(mat(x, batch, 2), nullptr);
  auto outv = mat(out, batch, 6);
  auto run = [&](GradientMode m, const TensorView* d_dy = nullptr, const TensorView* d_x = nullptr) {
    b.enc->backward_backward_input(*ctx, mat(x, batch, 2), mat(v, batch, 2), mat(dy, batch, 6), d_dy, d_x, false, m);
  };
  run(GradientMode::Overwrite);
  const auto once = b.grads;
  run(GradientMode::Accumulate);
  for (size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(b.grads[i], 2 * once[i], 1e-12);
  std::fill(b.grads.begin(), b.grads.end(), 7.0);
  run(GradientMode::Ignore, &outv);
  for (double e : b.grads) EXPECT_EQ(e, 7.0);
  // dL2/dinput alone: every value written, whatever the gradient mode; a wrong shape is named.
  std::vector<double> dx(batch * 2, NAN), dx3(batch * 3);
  auto dxv = mat(dx, batch, 2), dx3v = mat(dx3, batch, 3);
  run(GradientMode::Ignore, nullptr, &dxv);
  for (double e : dx) EXPECT_TRUE(std::isfinite(e));
  try {
    run(GradientMode::Ignore, nullptr, &dx3v);
    ADD_FAILURE() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "dL_dinput")) << e.what();
  }
  // Wrong shapes name the argument.
  std::vector<double> wrong(batch * 3);
  try {
    b.enc->backward_backward_input(*ctx, mat(x, batch, 2), mat(wrong, batch, 3), mat(dy, batch, 6), nullptr, nullptr,
                                   false, GradientMode::Overwrite);
    ADD_FAILURE() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "dL_ddLdinput")) << e.what();
  }
}

// ---- Determinism, gradient modes, stochastic interpolation ----

TEST(GridEncoding, ParamGradientsEqualSerialReferenceBitwise) {
  // The engine splits the batch and the levels across threads; a serial sum in fixed order
  // (level, record, corner) gives the same bits, so the result does not depend on the thread
  // count or on scheduling.
  Pcg32 rng(21);
  for (std::string type : {"Hash", "Dense"}) {
    GridCase g;
    g.type = type, g.dims = 3, g.levels = 5, g.features = 2, g.log2_size = 9, g.base = 4, g.per_level_scale = 2.0f;
    auto b = build(g, rng);
    const int64_t batch = 5000;
    std::vector<double> x(batch * 3), dy(batch * 10);
    for (auto& v : x) v = rng.next_double();
    for (auto& v : dy) v = 2 * rng.next_double() - 1;
    auto ctx = b.enc->forward(mat(x, batch, 3), nullptr);
    b.enc->backward(*ctx, mat(x, batch, 3), mat(dy, batch, 10), mat(dy, batch, 10), nullptr, false,
                    GradientMode::Overwrite);
    const auto ref = ref_param_gradients(g, x, dy, batch, 10);
    ASSERT_EQ(ref.size(), b.grads.size());
    EXPECT_EQ(std::memcmp(ref.data(), b.grads.data(), ref.size() * sizeof(double)), 0) << type;
  }
}

TEST(GridEncoding, BackwardIsDeterministicInFloat) {
  Pcg32 rng(22);
  GridCase g;
  g.dims = 3, g.levels = 8, g.features = 2, g.log2_size = 12, g.base = 8, g.per_level_scale = 1.6f;
  auto enc = create_encoding(g.config(), 3);
  std::vector<float> params(enc->n_params()), g1(enc->n_params()), g2(enc->n_params());
  enc->initialize_params(rng, params.data(), 1e4f);
  const int64_t batch = 20000;
  std::vector<float> x(batch * 3), dy(batch * 16), dx1(batch * 3), dx2(batch * 3);
  for (auto& v : x) v = rng.next_float();
  for (auto& v : dy) v = rng.next_float() - 0.5f;
  auto pv = TensorView::vector(params.data(), params.size());
  auto xv = TensorView::matrix(x.data(), batch, 3), dyv = TensorView::matrix(dy.data(), batch, 16);
  auto run = [&](std::vector<float>& grads, std::vector<float>& dx) {
    enc->set_params(pv, pv, TensorView::vector(grads.data(), grads.size()));
    auto ctx = enc->forward(xv, nullptr);
    auto dxv = TensorView::matrix(dx.data(), batch, 3);
    enc->backward(*ctx, xv, dyv, dyv, &dxv, false, GradientMode::Overwrite);
  };
  run(g1, dx1);
  run(g2, dx2);
  EXPECT_EQ(std::memcmp(g1.data(), g2.data(), g1.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(dx1.data(), dx2.data(), dx1.size() * sizeof(float)), 0);
}

TEST(GridEncoding, GradientModes) {
  Pcg32 rng(23);
  GridCase g;
  auto b = build(g, rng);
  const int64_t batch = 33;
  auto x = inputs_inside_cells(g, rng, batch);
  std::vector<double> dy(batch * 6);
  for (auto& v : dy) v = rng.next_double();
  auto ctx = b.enc->forward(mat(x, batch, 2), nullptr);
  auto back = [&](GradientMode m) { b.enc->backward(*ctx, mat(x, batch, 2), mat(dy, batch, 6), mat(dy, batch, 6), nullptr, false, m); };
  back(GradientMode::Overwrite);
  const auto once = b.grads;
  back(GradientMode::Accumulate);
  for (size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(b.grads[i], 2 * once[i], 1e-12);
  std::fill(b.grads.begin(), b.grads.end(), 123.0);
  back(GradientMode::Ignore);
  for (double v : b.grads) EXPECT_EQ(v, 123.0);
  back(GradientMode::Overwrite);
  EXPECT_EQ(b.grads, once);
  // Gradients of padded output columns are ignored.
  b.enc->set_alignment(16);
  std::vector<double> dy16(batch * 16, 0.0), y16(batch * 16);
  for (int64_t r = 0; r < batch; ++r)
    for (int j = 0; j < 16; ++j) dy16[r * 16 + j] = j < 6 ? dy[r * 6 + j] : 1e3;
  auto y16v = mat(y16, batch, 16);
  auto ctx16 = b.enc->forward(mat(x, batch, 2), &y16v);
  b.enc->backward(*ctx16, mat(x, batch, 2), mat(y16, batch, 16), mat(dy16, batch, 16), nullptr, false,
                  GradientMode::Overwrite);
  EXPECT_EQ(b.grads, once);
  // An empty batch overwrites with zeros.
  std::vector<double> none;
  auto ctx0 = b.enc->forward(TensorView::matrix(none.data(), 0, 2), nullptr);
  b.enc->backward(*ctx0, TensorView::matrix(none.data(), 0, 2), TensorView::matrix(none.data(), 0, 16),
                  TensorView::matrix(none.data(), 0, 16), nullptr, false, GradientMode::Overwrite);
  for (double v : b.grads) EXPECT_EQ(v, 0.0);
}

TEST(GridEncoding, StochasticInterpolationSendsGradientToOneCorner) {
  // One 1-D dense level, one record: the whole gradient goes to the lower vertex when the
  // record's sample (first float of PCG32 seeded with (1337 << 32) | record) is >= its weight.
  Pcg32 first((uint64_t(1337) << 32) | 0u);
  const double sample = first.next_float();
  for (double x0 : {0.05, 0.2, 0.45, 0.7, 0.95}) {
    auto enc = create_encoding({{"otype", "DenseGrid"}, {"n_levels", 1}, {"base_resolution", 9}, {"n_features_per_level", 1},
                                {"stochastic_interpolation", true}},
                               1, kF64);
    std::vector<double> params(enc->n_params(), 0.0), grads(enc->n_params(), -1.0);
    auto pv = TensorView::vector(params.data(), params.size());
    enc->set_params(pv, pv, TensorView::vector(grads.data(), grads.size()));
    std::vector<double> x = {x0}, dy = {2.5};
    auto ctx = enc->forward(mat(x, 1, 1), nullptr);
    enc->backward(*ctx, mat(x, 1, 1), mat(dy, 1, 1), mat(dy, 1, 1), nullptr, false, GradientMode::Overwrite);
    const double pos = 8 * x0 + 0.5, w = pos - std::floor(pos);
    const size_t expected = size_t(std::floor(pos)) + (sample >= w ? 0 : 1);
    for (size_t i = 0; i < grads.size(); ++i) EXPECT_EQ(grads[i], i == expected ? 2.5 : 0.0) << "x " << x0 << " i " << i;
  }
}

// ---- Initialisation ----

TEST(GridEncoding, InitialisationFollowsTcnnFillOrder) {
  // tiny-cuda-nn fills on the GPU: thread i of L = 128 * ceil(ceil(n / 4) / 128) takes draws
  // 4i..4i+3 for elements i, i + L, i + 2L, i + 3L; afterwards the generator has moved n draws.
  auto enc = create_encoding({{"otype", "DenseGrid"}, {"n_levels", 2}, {"base_resolution", 20}, {"n_features_per_level", 1},
                              {"per_level_scale", 1.0}},
                             1);
  const size_t n = enc->n_params();
  ASSERT_EQ(n, 48u);  // 2 levels of 20 vertices rounded to 24 -> L = 128
  Pcg32 rng(77), copy(77);
  std::vector<float> params(n);
  enc->initialize_params(rng, params.data(), 2.0f);
  std::vector<float> draws(4 * n);
  for (auto& d : draws) d = copy.next_float();
  for (size_t idx = 0; idx < n; ++idx) {
    const float expected = std::fma(draws[4 * (idx % 128) + idx / 128], 4e-4f, -2e-4f);
    EXPECT_EQ(params[idx], expected) << idx;
    EXPECT_LE(std::abs(params[idx]), 2e-4f);
  }
  Pcg32 after(77);
  for (size_t k = 0; k < n; ++k) after.next_uint();
  EXPECT_EQ(rng.next_uint(), after.next_uint());
  // Past 512 elements the threads' strides interleave: element 600 of 1000 is i = 88, j = 2
  // (L = 256), i.e. draw 354.
  auto enc1000 = create_encoding({{"otype", "DenseGrid"}, {"n_levels", 1}, {"base_resolution", 1000}, {"n_features_per_level", 1}}, 1);
  ASSERT_EQ(enc1000->n_params(), 1000u);
  std::vector<float> big(1000);
  Pcg32 r2(5), c2(5);
  enc1000->initialize_params(r2, big.data(), 1.0f);
  float d354 = 0;
  for (int k = 0; k <= 354; ++k) d354 = c2.next_float();
  EXPECT_EQ(big[600], std::fma(d354, 2e-4f, -1e-4f));
}

// ---- Composition ----

TEST(GridEncoding, FeedsANetwork) {
  auto model = create_network_with_input_encoding(
      3, 2, {{"otype", "HashGrid"}, {"n_levels", 8}, {"log2_hashmap_size", 12}},
      {{"otype", "FullyFusedMLP"}, {"n_neurons", 16}, {"n_hidden_layers", 1}});
  auto grid = create_encoding({{"otype", "HashGrid"}, {"n_levels", 8}, {"log2_hashmap_size", 12}}, 3);
  EXPECT_EQ(model->n_params(), grid->n_params() + 16 * 16 + 16 * 16);  // W0 (16x16), W1 (16x16)
  std::vector<float> params(model->n_params());
  Pcg32 rng(1);
  model->initialize_params(rng, params.data(), 1.0f);
  auto pv = TensorView::vector(params.data(), params.size());
  model->set_params(pv, pv, TensorView{});
  std::vector<float> x(30), y(10 * 16, NAN);
  for (auto& v : x) v = rng.next_float();
  model->inference(TensorView::matrix(x.data(), 10, 3), TensorView::matrix(y.data(), 10, 16));
  for (int r = 0; r < 10; ++r)
    for (int j = 0; j < 2; ++j) EXPECT_TRUE(std::isfinite(y[r * 16 + j]));
}

}  // namespace
