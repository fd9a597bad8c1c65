#include "core/optimizer_config.h"

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/config_reader.h"
#include "core/otypes.h"

namespace tinyfuse {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Backends compute in float: a value must survive the conversion (not overflow to inf).
double get_float(const ConfigReader& r, const std::string& key, double fallback, double lo, double hi) {
  return r.get_number(key, fallback, lo, hi < FLT_MAX ? hi : FLT_MAX);
}

// A number > 0 that stays > 0 as a float.
double get_positive(const ConfigReader& r, const std::string& key, double fallback) {
  double v = get_float(r, key, fallback, 0.0, kInf);
  if (static_cast<float>(v) <= 0.0f) r.fail(key, "must be > 0", "a finite number > 0");
  return v;
}

// A number in [0, 1) whose float is also < 1 (so 1 - beta^t never vanishes).
double get_unit_open(const ConfigReader& r, const std::string& key, double fallback) {
  double v = get_float(r, key, fallback, 0.0, 1.0);
  if (static_cast<float>(v) >= 1.0f) r.fail(key, "must be < 1", "a number in [0, 1)");
  return v;
}

const std::vector<std::string> kAdamKeys = {"learning_rate",
                                            "beta1",
                                            "beta2",
                                            "epsilon",
                                            "l2_reg",
                                            "non_matrix_l2_reg",
                                            "relative_decay",
                                            "absolute_decay",
                                            "clipping_magnitude",
                                            "gradient_clipping_magnitude",
                                            "adabound",
                                            "non_matrix_learning_rate_factor",
                                            "optimize_matrix_params",
                                            "optimize_non_matrix_params",
                                            "skip_zero_grad_non_matrix_params"};
const std::vector<std::string> kSgdKeys = {"learning_rate", "l2_reg"};
const std::vector<std::string> kDecayKeys = {"decay_base", "decay_start", "decay_interval", "decay_end", "nested"};
const std::vector<std::string> kEmaKeys = {"decay", "full_precision", "nested"};
const std::vector<std::string> kCompositeKeys = {"nested"};

OptimizerSpec parse(const json& config, const std::string& path, bool composite_entry);

// The single nested optimizer of a wrapper; tiny-cuda-nn's default is {} (an Adam).
OptimizerSpec parse_wrapped(const ConfigReader& r) {
  return parse(r.has("nested") ? r.get_object("nested") : json::object(), r.key_path("nested"), false);
}

OptimizerSpec parse(const json& config, const std::string& path, bool composite_entry) {
  const json defaulted = config.is_object() && !config.contains("otype") ? [&] {
    json c = config;
    c["otype"] = "Adam";  // tiny-cuda-nn's default
    return c;
  }() : config;

  OptimizerSpec spec;
  spec.path = path;
  spec.otype = read_otype(defaulted, path, optimizer_names());
  for (size_t i = 0; i < optimizer_names().size(); ++i)
    if (optimizer_names()[i] == spec.otype) spec.kind = static_cast<OptimizerKind>(i);

  std::vector<std::string> keys;
  switch (spec.kind) {
    case OptimizerKind::Adam: keys = kAdamKeys; break;
    case OptimizerKind::SGD: keys = kSgdKeys; break;
    case OptimizerKind::ExponentialDecay: keys = kDecayKeys; break;
    case OptimizerKind::EMA: keys = kEmaKeys; break;
    case OptimizerKind::Composite: keys = kCompositeKeys; break;
  }
  if (composite_entry) keys.push_back("n_params_to_optimize");
  ConfigReader r(defaulted, path, keys);
  if (composite_entry)
    spec.n_params_to_optimize = r.get_uint("n_params_to_optimize", 0, 0, std::numeric_limits<uint32_t>::max());

  switch (spec.kind) {
    case OptimizerKind::Adam: {
      AdamSpec& a = spec.adam;
      a.learning_rate = get_positive(r, "learning_rate", a.learning_rate);
      a.beta1 = get_unit_open(r, "beta1", a.beta1);
      a.beta2 = get_unit_open(r, "beta2", a.beta2);
      a.epsilon = get_positive(r, "epsilon", a.epsilon);
      a.l2_reg = get_float(r, "l2_reg", a.l2_reg, 0.0, kInf);
      a.non_matrix_l2_reg = get_float(r, "non_matrix_l2_reg", a.non_matrix_l2_reg, 0.0, kInf);
      a.relative_decay = get_float(r, "relative_decay", a.relative_decay, 0.0, kInf);
      a.absolute_decay = get_float(r, "absolute_decay", a.absolute_decay, 0.0, kInf);
      a.clipping_magnitude = get_float(r, "clipping_magnitude", a.clipping_magnitude, 0.0, kInf);
      a.gradient_clipping_magnitude =
          get_float(r, "gradient_clipping_magnitude", a.gradient_clipping_magnitude, 0.0, kInf);
      a.adabound = r.get_bool("adabound", a.adabound);
      a.non_matrix_learning_rate_factor =
          get_float(r, "non_matrix_learning_rate_factor", a.non_matrix_learning_rate_factor, 0.0, kInf);
      a.optimize_matrix_params = r.get_bool("optimize_matrix_params", a.optimize_matrix_params);
      a.optimize_non_matrix_params = r.get_bool("optimize_non_matrix_params", a.optimize_non_matrix_params);
      a.skip_zero_grad_non_matrix_params =
          r.get_bool("skip_zero_grad_non_matrix_params", a.skip_zero_grad_non_matrix_params);
      break;
    }
    case OptimizerKind::SGD:
      spec.sgd.learning_rate = get_positive(r, "learning_rate", spec.sgd.learning_rate);
      spec.sgd.l2_reg = get_float(r, "l2_reg", spec.sgd.l2_reg, 0.0, kInf);
      break;
    case OptimizerKind::ExponentialDecay: {
      ExponentialDecaySpec& d = spec.exponential_decay;
      const uint32_t umax = std::numeric_limits<uint32_t>::max();
      d.decay_base = get_positive(r, "decay_base", d.decay_base);
      d.decay_start = r.get_uint("decay_start", d.decay_start, 0, umax);
      d.decay_interval = r.get_uint("decay_interval", d.decay_interval, 1, umax);
      d.decay_end = r.get_uint("decay_end", d.decay_end, 0, umax);
      spec.nested.push_back(parse_wrapped(r));
      break;
    }
    case OptimizerKind::EMA:
      spec.ema.decay = get_unit_open(r, "decay", spec.ema.decay);
      spec.ema.full_precision = r.get_bool("full_precision", spec.ema.full_precision);
      spec.nested.push_back(parse_wrapped(r));
      break;
    case OptimizerKind::Composite: {
      const std::string accepted =
          "a non-empty array of optimizer configs, each with \"n_params_to_optimize\" "
          "(e.g. [{\"otype\": \"Adam\", \"n_params_to_optimize\": 1024}, ...])";
      if (!r.has("nested")) r.fail("nested", "required key is missing", accepted);
      const json& list = r.raw("nested");
      if (!list.is_array()) r.fail("nested", "must be an array", accepted);
      if (list.empty()) r.fail("nested", "must not be empty", accepted);
      for (size_t i = 0; i < list.size(); ++i)
        spec.nested.push_back(parse(list[i], r.key_path("nested") + "[" + std::to_string(i) + "]", true));
      break;
    }
  }
  return spec;
}

}  // namespace

const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names = otype_names(ObjectKind::Optimizer);  // in OptimizerKind's order
  return names;
}

OptimizerSpec parse_optimizer_config(const json& config, const std::string& path) { return parse(config, path, false); }

double tidy_float(float x) {
  if (!std::isfinite(x)) return x;
  char buf[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(x));
    double d = std::strtod(buf, nullptr);
    if (static_cast<float>(d) == x) return d;
  }
  return x;
}

json optimizer_spec_json(const OptimizerSpec& spec) {
  json j = {{"otype", spec.otype}};
  switch (spec.kind) {
    case OptimizerKind::Adam: {
      const AdamSpec& a = spec.adam;
      j["learning_rate"] = a.learning_rate;
      j["beta1"] = a.beta1;
      j["beta2"] = a.beta2;
      j["epsilon"] = a.epsilon;
      j["l2_reg"] = a.l2_reg;
      j["non_matrix_l2_reg"] = a.non_matrix_l2_reg;
      j["relative_decay"] = a.relative_decay;
      j["absolute_decay"] = a.absolute_decay;
      j["clipping_magnitude"] = a.clipping_magnitude;
      j["gradient_clipping_magnitude"] = a.gradient_clipping_magnitude;
      j["adabound"] = a.adabound;
      j["non_matrix_learning_rate_factor"] = a.non_matrix_learning_rate_factor;
      j["optimize_matrix_params"] = a.optimize_matrix_params;
      j["optimize_non_matrix_params"] = a.optimize_non_matrix_params;
      j["skip_zero_grad_non_matrix_params"] = a.skip_zero_grad_non_matrix_params;
      break;
    }
    case OptimizerKind::SGD:
      j["learning_rate"] = spec.sgd.learning_rate;
      j["l2_reg"] = spec.sgd.l2_reg;
      break;
    case OptimizerKind::ExponentialDecay:
      j["decay_base"] = spec.exponential_decay.decay_base;
      j["decay_start"] = spec.exponential_decay.decay_start;
      j["decay_interval"] = spec.exponential_decay.decay_interval;
      j["decay_end"] = spec.exponential_decay.decay_end;
      j["nested"] = optimizer_spec_json(spec.nested.at(0));
      break;
    case OptimizerKind::EMA:
      j["decay"] = spec.ema.decay;
      j["full_precision"] = spec.ema.full_precision;
      j["nested"] = optimizer_spec_json(spec.nested.at(0));
      break;
    case OptimizerKind::Composite:
      j["nested"] = json::array();
      for (const auto& n : spec.nested) {
        json e = optimizer_spec_json(n);
        e["n_params_to_optimize"] = n.n_params_to_optimize;
        j["nested"].push_back(std::move(e));
      }
      break;
  }
  return j;
}

}  // namespace tinyfuse
