// What `tinyfuse learn-sdf` learns the signed distance of: a built-in shape with an exact signed
// distance function, or a surface given as points with normals in a file. Everything lives in the
// unit cube [0, 1]^3, the network's input domain; a points file is scaled into it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tinyfuse/random.h"

namespace tinyfuse::cli {

// Points on a surface with their unit outward normals, n x 3 each.
struct SurfacePoints {
  std::vector<float> points, normals;
  int64_t size() const { return static_cast<int64_t>(points.size() / 3); }
};

// Points files larger than this are refused before they are read.
constexpr uint64_t kMaxPointsFileBytes = uint64_t{1} << 30;
// A points file needs at least this many points (a tenth of them are held out).
constexpr int64_t kMinFilePoints = 20;

class SdfSource {
 public:
  // The names built_in() takes.
  static const std::vector<std::string>& builtin_names();
  // A built-in shape: its training surface points and held-out points are drawn from `seed`.
  // Throws std::invalid_argument for an unknown name (the message lists the known ones).
  static SdfSource built_in(const std::string& name, uint64_t seed);
  // The points file format (docs/CLI in README, learn_sdf_usage()): text, one point per line,
  // "x y z nx ny nz" separated by spaces or tabs (Open3D's .xyzn); '#' starts a comment line;
  // blank lines are skipped. Normals need not be unit length but must not be zero. The points are
  // scaled (uniformly) and moved so that their bounding box is centred in the unit cube with its
  // longest side 0.8; every tenth point is held out. Throws tinyfuse::Error naming the file and
  // line for anything else.
  static SdfSource from_points_file(const std::string& path);

  // True for built-in shapes: exact_sdf() then gives the signed distance anywhere.
  bool has_exact_sdf() const { return shape_ >= 0; }
  double exact_sdf(const double* p) const;

  // `n` training surface points with their normals (n x 3 each).
  void draw_surface(Pcg32& rng, int64_t n, float* points, float* normals) const;
  const SurfacePoints& training_surface() const { return train_; }
  const SurfacePoints& heldout_surface() const { return heldout_; }

  // "built-in torus" or the file's path; and how file coordinates map to the unit cube
  // (unit = centre_unit + (file - centre) * scale), for the log.
  const std::string& description() const { return description_; }
  nlohmann::ordered_json log_entry() const;
  double scale() const { return scale_; }

 private:
  int shape_ = -1;  // index into builtin_names(), -1 for a points file
  std::string description_;
  SurfacePoints train_, heldout_;
  double centre_[3] = {0.5, 0.5, 0.5}, scale_ = 1.0;
};

}  // namespace tinyfuse::cli
