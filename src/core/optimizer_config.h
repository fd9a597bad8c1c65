// Reading an optimizer config into device-neutral specs (tiny-cuda-nn's keys and defaults), with
// every rule checked here once so all backends accept the same configs. No math lives here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tinyfuse/object.h"

namespace tinyfuse {

// Numbers are kept in double so hyperparams() echo what the config said; backends compute in float.
struct AdamSpec {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double l2_reg = 1e-8;  // matrix params only
  double non_matrix_l2_reg = 0.0;  // the same for non-matrix params (biases, grids)
  double relative_decay = 0.0;
  double absolute_decay = 0.0;
  double clipping_magnitude = 0.0;           // the weights after a step, to +-this; 0: off
  double gradient_clipping_magnitude = 0.0;  // each gradient (after l2) to +-this; 0: off
  bool adabound = false;
  double non_matrix_learning_rate_factor = 1.0;
  bool optimize_matrix_params = true;
  bool optimize_non_matrix_params = true;
  // Non-matrix params whose gradient is exactly 0 keep their value, moments and step count
  // (untouched hash-grid entries); false updates them like any other.
  bool skip_zero_grad_non_matrix_params = true;
};

struct SgdSpec {
  double learning_rate = 1e-3;
  double l2_reg = 1e-8;
};

struct ExponentialDecaySpec {
  double decay_base = 0.1;
  uint32_t decay_start = 10000;
  uint32_t decay_interval = 10000;
  uint32_t decay_end = 10000000;
};

struct EmaSpec {
  double decay = 0.99;
  bool full_precision = false;
};

enum class OptimizerKind { Adam, SGD, ExponentialDecay, EMA, Composite };

// One optimizer config, with the optimizers it wraps in `nested`: one for ExponentialDecay and
// EMA, one per parameter range (in buffer order) for Composite, none otherwise. Only the spec
// matching `kind` is meaningful.
struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::Adam;
  std::string otype = "Adam";  // canonical spelling
  std::string path;            // where the config sat ("optimizer.nested[1]"), for messages
  AdamSpec adam;
  SgdSpec sgd;
  ExponentialDecaySpec exponential_decay;
  EmaSpec ema;
  uint32_t n_params_to_optimize = 0;  // only for entries of a Composite's "nested" array
  std::vector<OptimizerSpec> nested;
};

// Canonical otype spellings (matched case-insensitively; "Ema" works).
const std::vector<std::string>& optimizer_names();

// Parses and checks an optimizer config; a missing "otype" means "Adam". Throws ConfigError
// naming the key path ("optimizer.nested[1].beta2").
OptimizerSpec parse_optimizer_config(const json& config, const std::string& path = "optimizer");

// The hyperparameters of `spec` as JSON, in tiny-cuda-nn's key names (nested specs included).
json optimizer_spec_json(const OptimizerSpec& spec);

// `x` as the shortest decimal that reads back as the same float, so that a learning rate of
// 1e-3f is echoed as 0.001 rather than 0.0010000000474974513.
double tidy_float(float x);

}  // namespace tinyfuse
