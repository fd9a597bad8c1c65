// A workload's model, built on a device: the differentiable object (a NetworkWithInputEncoding
// from the tiny-cuda-nn config, or W3's NeRF field), its loss, and a Trainer with the config's
// optimizer. And what one sample costs it: tensor FLOP, the grid entries it touches, and the
// bytes it must stream (the workload's own limit, see README).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tinyfuse/factory.h"
#include "workloads/spec.h"

namespace tinyfuse::bench {

struct WorkloadModel {
  std::shared_ptr<DifferentiableObject> object;
  std::shared_ptr<Loss> loss;
  std::shared_ptr<Trainer> trainer;
};

// Throws ConfigError / UnsupportedError as the factory does, naming the workload file.
WorkloadModel build_workload_model(const WorkloadSpec& w, const BuildOptions& options, uint64_t seed);

// The object alone (parameters not set): the CPU reference a device's outputs are checked against.
std::unique_ptr<DifferentiableObject> build_workload_object(const WorkloadSpec& w, const BuildOptions& options);

// Per sample of one training step or inference call.
struct WorkloadCost {
  double forward_flop = 0;  // 2 * sum(in * out) over every MLP layer, at the widths the networks compute
  struct Grid {
    uint32_t dims = 0, levels = 0, features_per_level = 0;
    size_t n_params = 0;    // table entries x features
  };
  std::vector<Grid> grids;
  // Table bytes of all grids at `param_bytes` per parameter.
  double grid_table_bytes(size_t param_bytes) const;
  // Grid traffic per sample: each level's 2^dims corners' features read (param_bytes each); a
  // training step adds one FP32 gradient contribution per corner feature.
  double grid_bytes_per_sample(size_t param_bytes, bool training) const;
  // MLP sweeps per training step and sample, each forward_flop: 3 for the Trainer's (forward, data
  // and weight gradients); 4 for the eikonal step, the mean of its halves: the L1 rows 3 as the
  // Trainer's, the eikonal rows 5 (forward, the input gradient's back sweep, and
  // backward_backward_input's tangent sweep forward with its data and weight gradients back). A
  // count of matrix products, not measured.
  double training_sweeps = 3.0;
  double flop_per_sample(bool training) const { return training ? training_sweeps * forward_flop : forward_flop; }
};
WorkloadCost workload_cost(const WorkloadSpec& w);

}  // namespace tinyfuse::bench
