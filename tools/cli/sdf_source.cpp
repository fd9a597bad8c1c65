#include "sdf_source.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "core/file_read.h"
#include "tinyfuse/errors.h"

namespace tinyfuse::cli {

namespace {

// ---- Built-in shapes: exact signed distances (negative inside) in unit-cube coordinates ----

double length3(double x, double y, double z) { return std::sqrt(x * x + y * y + z * z); }

// A torus around the y axis through the cube's centre: major radius 0.25, minor 0.1.
double torus_sdf(const double* p) {
  const double x = p[0] - 0.5, y = p[1] - 0.5, z = p[2] - 0.5;
  const double ring = std::sqrt(x * x + z * z) - 0.25;
  return std::sqrt(ring * ring + y * y) - 0.1;
}

double sphere_sdf(const double* p, const double* c, double r) { return length3(p[0] - c[0], p[1] - c[1], p[2] - c[2]) - r; }

double box_sdf(const double* p, const double* c, const double* half) {
  double q[3], outside = 0, inside = -1e300;
  for (int d = 0; d < 3; ++d) {
    q[d] = std::abs(p[d] - c[d]) - half[d];
    outside += std::max(q[d], 0.0) * std::max(q[d], 0.0);
    inside = std::max(inside, q[d]);
  }
  return std::sqrt(outside) + std::min(inside, 0.0);
}

double capsule_sdf(const double* p, const double* a, const double* b, double r) {
  double ab[3], ap[3], dot_ab = 0, dot = 0;
  for (int d = 0; d < 3; ++d) ab[d] = b[d] - a[d], ap[d] = p[d] - a[d], dot_ab += ab[d] * ab[d], dot += ap[d] * ab[d];
  const double t = std::clamp(dot / dot_ab, 0.0, 1.0);
  return length3(ap[0] - t * ab[0], ap[1] - t * ab[1], ap[2] - t * ab[2]) - r;
}

// A sphere, a box and a capsule, apart from each other: the minimum of their exact distances is
// then the exact distance of the union, inside as well as outside.
double union_sdf(const double* p) {
  static const double sphere_c[3] = {0.32, 0.34, 0.5}, box_c[3] = {0.68, 0.64, 0.5}, box_half[3] = {0.13, 0.11, 0.15};
  static const double cap_a[3] = {0.3, 0.74, 0.3}, cap_b[3] = {0.3, 0.74, 0.7};
  return std::min({sphere_sdf(p, sphere_c, 0.16), box_sdf(p, box_c, box_half), capsule_sdf(p, cap_a, cap_b, 0.07)});
}

using SdfFunction = double (*)(const double*);
const SdfFunction kBuiltinSdfs[] = {torus_sdf, union_sdf};

constexpr int64_t kBuiltinTrainingPoints = int64_t{1} << 16;
constexpr int64_t kBuiltinHeldoutPoints = 4096;
constexpr double kSamplingBand = 0.02;  // surface points: projected from points this close

void gradient(SdfFunction f, const double* p, double* g) {
  const double h = 1e-6;
  for (int d = 0; d < 3; ++d) {
    double a[3] = {p[0], p[1], p[2]}, b[3] = {p[0], p[1], p[2]};
    a[d] += h, b[d] -= h;
    g[d] = (f(a) - f(b)) / (2 * h);
  }
}

// Points drawn uniformly in a thin band around the surface and moved onto it along the distance's
// gradient (an exact distance's closest point): close to uniform over the surface's area.
SurfacePoints sample_surface(SdfFunction f, int64_t n, Pcg32& rng) {
  SurfacePoints s;
  s.points.reserve(3 * n);
  s.normals.reserve(3 * n);
  while (s.size() < n) {
    double p[3] = {rng.next_double(), rng.next_double(), rng.next_double()}, g[3];
    double d = f(p);
    if (std::abs(d) > kSamplingBand) continue;
    for (int iteration = 0; iteration < 2; ++iteration) {
      gradient(f, p, g);
      const double norm = length3(g[0], g[1], g[2]);
      if (!(norm > 0.5)) break;  // on a medial axis: the gradient is undefined
      for (int k = 0; k < 3; ++k) p[k] -= d * g[k] / norm;
      d = f(p);
    }
    gradient(f, p, g);
    const double norm = length3(g[0], g[1], g[2]);
    if (std::abs(d) > 1e-9 || !(norm > 0.5)) continue;
    for (int k = 0; k < 3; ++k) {
      s.points.push_back(static_cast<float>(p[k]));
      s.normals.push_back(static_cast<float>(g[k] / norm));
    }
  }
  return s;
}

[[noreturn]] void bad_line(const std::string& path, int64_t line, const std::string& why) {
  throw Error("points file \"" + path + "\" line " + std::to_string(line) + ": " + why +
              "; each line holds 'x y z nx ny nz' (a point and its outward normal)");
}

}  // namespace

const std::vector<std::string>& SdfSource::builtin_names() {
  static const std::vector<std::string> names = {"torus", "union"};
  return names;
}

SdfSource SdfSource::built_in(const std::string& name, uint64_t seed) {
  const auto& names = builtin_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown shape '" + name + "'; built-in shapes: " + known);
  }
  SdfSource s;
  s.shape_ = static_cast<int>(it - names.begin());
  s.description_ = "built-in " + name;
  Pcg32 rng(seed, 0x736466ULL);
  s.train_ = sample_surface(kBuiltinSdfs[s.shape_], kBuiltinTrainingPoints, rng);
  s.heldout_ = sample_surface(kBuiltinSdfs[s.shape_], kBuiltinHeldoutPoints, rng);
  return s;
}

SdfSource SdfSource::from_points_file(const std::string& path) {
  const std::string text =
      read_regular_file(path, kMaxPointsFileBytes, "points file \"" + path + "\"", "kMaxPointsFileBytes");
  SurfacePoints all;
  int64_t line = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    ++line;
    std::string row = text.substr(pos, end - pos);
    pos = end + 1;
    if (!row.empty() && row.back() == '\r') row.pop_back();
    const size_t first = row.find_first_not_of(" \t");
    if (first == std::string::npos || row[first] == '#') continue;
    double v[6];
    int n = 0;
    const char* c = row.c_str();
    while (true) {
      while (*c == ' ' || *c == '\t') ++c;
      if (!*c) break;
      const char* word = c;
      while (*c && *c != ' ' && *c != '\t') ++c;
      const std::string token(word, c);
      if (n == 6) bad_line(path, line, "more than 6 numbers");
      char* stop = nullptr;
      errno = 0;
      v[n] = std::strtod(token.c_str(), &stop);
      if (stop != token.c_str() + token.size() || token.empty()) bad_line(path, line, "'" + token + "' is not a number");
      if (!std::isfinite(v[n]) || errno == ERANGE) bad_line(path, line, "'" + token + "' is not a finite number");
      ++n;
    }
    if (n != 6) bad_line(path, line, "expected 6 numbers, got " + std::to_string(n));
    const double norm = length3(v[3], v[4], v[5]);
    if (!(norm > 0) || !std::isfinite(norm)) bad_line(path, line, "the normal is zero");
    for (int k = 0; k < 3; ++k) {
      all.points.push_back(static_cast<float>(v[k]));
      all.normals.push_back(static_cast<float>(v[3 + k] / norm));
    }
  }
  if (all.size() < kMinFilePoints)
    throw Error("points file \"" + path + "\" holds " + std::to_string(all.size()) + " points; learn-sdf needs at least " +
                std::to_string(kMinFilePoints) + " (a tenth are held out to measure the result)");
  double lo[3], hi[3];
  for (int k = 0; k < 3; ++k) lo[k] = hi[k] = all.points[k];
  for (int64_t i = 0; i < all.size(); ++i)
    for (int k = 0; k < 3; ++k) lo[k] = std::min<double>(lo[k], all.points[3 * i + k]), hi[k] = std::max<double>(hi[k], all.points[3 * i + k]);
  const double extent = std::max({hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]});
  if (!(extent > 0) || !std::isfinite(extent))
    throw Error("points file \"" + path + "\": all points are the same point; a surface needs points that span it");
  SdfSource s;
  s.description_ = path;
  s.scale_ = 0.8 / extent;
  for (int k = 0; k < 3; ++k) s.centre_[k] = 0.5 * (lo[k] + hi[k]);
  for (int64_t i = 0; i < all.size(); ++i) {
    SurfacePoints& to = i % 10 == 9 ? s.heldout_ : s.train_;
    for (int k = 0; k < 3; ++k) {
      to.points.push_back(static_cast<float>(0.5 + (all.points[3 * i + k] - s.centre_[k]) * s.scale_));
      to.normals.push_back(all.normals[3 * i + k]);
    }
  }
  return s;
}

double SdfSource::exact_sdf(const double* p) const {
  if (shape_ < 0) throw std::logic_error("SdfSource::exact_sdf: a points file has no exact distance");
  return kBuiltinSdfs[shape_](p);
}

void SdfSource::draw_surface(Pcg32& rng, int64_t n, float* points, float* normals) const {
  const uint64_t size = static_cast<uint64_t>(train_.size());
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t j = ((static_cast<uint64_t>(rng.next_uint()) << 32) | rng.next_uint()) % size;
    std::copy(&train_.points[3 * j], &train_.points[3 * j] + 3, points + 3 * i);
    std::copy(&train_.normals[3 * j], &train_.normals[3 * j] + 3, normals + 3 * i);
  }
}

nlohmann::ordered_json SdfSource::log_entry() const {
  nlohmann::ordered_json e = {{"source", description_},
                              {"training_points", train_.size()},
                              {"heldout_surface_points", heldout_.size()}};
  if (!has_exact_sdf())
    e["to_unit_cube"] = {{"centre_in_file", {centre_[0], centre_[1], centre_[2]}},
                         {"scale", scale_},
                         {"rule", "unit = 0.5 + (file - centre_in_file) * scale"}};
  return e;
}

}  // namespace tinyfuse::cli
