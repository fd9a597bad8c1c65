// What the workloads learn: each draws training samples (inputs and their target values) on the
// host. The same definitions are written in PyTorch in benchmarks/torch/workload_data.py, so every
// side learns the same field; configs/README.md states them.
//   image     (W1, W2): x in [0, 1)^2 uniform; target: the built-in 256 x 256 test pattern of
//             `tinyfuse learn-image`, bilinear between pixel centres (the CLI's sampling).
//   radiance  (W3): position p in [0, 1)^3 uniform, direction d uniform on the unit sphere given as
//             (d + 1) / 2 (SphericalHarmonics reads [0, 1]); target RGB, for c = 0, 1, 2:
//             0.5 + 0.25 sin(2 pi (2 p_c + p_(c+1))) + 0.1 sin(16 pi (p_0 + p_1 + p_2)) + 0.1 d_c
//             (indices mod 3): in [0.05, 0.95], inside the Sigmoid's range.
//   sdf       (W4, W4e): p in [0, 1)^3 uniform; target: the signed distance to a sphere (centre
//             (0.4, 0.5, 0.5), radius 0.25) joined to a torus (centre (0.65, 0.5, 0.5), axis z,
//             radii 0.2 and 0.06): min of the two distances.
#pragma once

#include <cstdint>
#include <memory>

#include "tinyfuse/random.h"
#include "workloads/spec.h"

namespace tinyfuse::bench {

class TargetField {
 public:
  virtual ~TargetField() = default;
  // `n` samples: inputs (n, n_input_dims) and, when `target` is not null, their targets
  // (n, n_output_dims), row-major FP32.
  virtual void sample(Pcg32& rng, int64_t n, float* input, float* target) const = 0;
};

std::unique_ptr<TargetField> make_target_field(TargetKind kind);

// The target values at given inputs (n rows of the workload's input): the reference a trained
// model's outputs are compared with.
void target_values(TargetKind kind, const float* input, int64_t n, float* target);

}  // namespace tinyfuse::bench
