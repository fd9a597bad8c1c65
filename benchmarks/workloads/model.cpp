#include "workloads/model.h"

#include <cctype>
#include <stdexcept>

#include "core/encodings/grid_config.h"
#include "mlp_bench.h"
#include "workloads/nerf_field.h"

namespace tinyfuse::bench {

namespace {

std::string join(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

// Only the keys each part of W3's config reads (the factory checks everything inside them).
void check_keys(const json& object, const std::vector<std::string>& keys, const std::string& where, const WorkloadSpec& w) {
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (const std::string& k : keys) known = known || k == key;
    if (!known) throw ConfigError(where + key, value.dump(), "unknown key in the NeRF field config of " + w.file, join(keys));
  }
  for (const std::string& k : keys)
    if (!object.contains(k)) throw ConfigError(where + k, "(missing)", "the NeRF field config of " + w.file + " needs it", join(keys));
}

void check_nerf_config(const WorkloadSpec& w) {
  check_keys(w.config, {"loss", "optimizer", "density", "direction_encoding", "color_network"}, "config.", w);
  check_keys(w.config.at("density"), {"n_output_dims", "encoding", "network"}, "config.density.", w);
  const json& n = w.config.at("density").at("n_output_dims");
  if (!n.is_number_unsigned() || n.get<uint64_t>() < 1 || n.get<uint64_t>() > 1024)
    throw ConfigError("config.density.n_output_dims", n.dump(), "must be an integer (" + w.file + ")", "1 to 1024");
}

bool is_grid(const json& encoding) {
  auto lower = [](std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  const std::string otype = lower(encoding.value("otype", ""));
  for (const std::string& g : grid_otypes())
    if (otype == lower(g)) return true;
  return false;
}

// The network's forward FLOP at the widths it computes, behind an encoding of `encoding_width`.
double network_flop(const json& network_config, uint32_t encoding_width, uint32_t n_out) {
  return forward_flop_per_sample(*create_network(network_config, encoding_width, n_out));
}

// The encoding's output width once padded for the network after it.
uint32_t encoded_width(const json& encoding_config, uint32_t n_in, const json& network_config) {
  auto enc = create_encoding(encoding_config, n_in);
  enc->set_alignment(network_input_alignment(network_config, Device::CPU));
  return enc->padded_output_width();
}

WorkloadCost::Grid grid_of(const json& encoding_config, uint32_t dims) {
  const GridSpec s = parse_grid_config(encoding_config, "encoding", dims);
  return {dims, s.n_levels, s.n_features_per_level, s.n_params()};
}

}  // namespace

std::unique_ptr<DifferentiableObject> build_workload_object(const WorkloadSpec& w, const BuildOptions& options) {
  if (w.is_nerf_field()) {
    check_nerf_config(w);
    return make_nerf_field(w.config, w.n_output_dims, options);
  }
  return create_network_with_input_encoding(w.n_input_dims, w.n_output_dims, w.config.at("encoding"),
                                            w.config.at("network"), options);
}

WorkloadModel build_workload_model(const WorkloadSpec& w, const BuildOptions& options, uint64_t seed) {
  WorkloadModel m;
  if (!w.is_nerf_field()) {
    Model model = create_from_config(w.n_input_dims, w.n_output_dims, w.config, options, seed);
    m.object = model.network;
    m.loss = model.loss;
    m.trainer = model.trainer;
    return m;
  }
  m.object = build_workload_object(w, options);
  m.loss = create_loss(w.config.at("loss"), options);
  m.trainer = std::make_shared<Trainer>(m.object, create_optimizer(w.config.at("optimizer"), options), m.loss, seed);
  return m;
}

double WorkloadCost::grid_table_bytes(size_t param_bytes) const {
  double b = 0;
  for (const Grid& g : grids) b += static_cast<double>(g.n_params) * static_cast<double>(param_bytes);
  return b;
}

double WorkloadCost::grid_bytes_per_sample(size_t param_bytes, bool training) const {
  double b = 0;
  for (const Grid& g : grids) {
    const double touched = double(g.levels) * double(1u << g.dims) * double(g.features_per_level);
    b += touched * static_cast<double>(param_bytes) + (training ? touched * 4.0 : 0.0);
  }
  return b;
}

WorkloadCost workload_cost(const WorkloadSpec& w) {
  WorkloadCost c;
  if (w.step.kind == StepSpec::Kind::Eikonal) c.training_sweeps = 4.0;
  const json& cfg = w.config;
  if (!w.is_nerf_field()) {
    const uint32_t width = encoded_width(cfg.at("encoding"), w.n_input_dims, cfg.at("network"));
    c.forward_flop = network_flop(cfg.at("network"), width, w.n_output_dims);
    if (is_grid(cfg.at("encoding"))) c.grids.push_back(grid_of(cfg.at("encoding"), w.n_input_dims));
    return c;
  }
  check_nerf_config(w);
  const json& d = cfg.at("density");
  const uint32_t density_out = d.at("n_output_dims").get<uint32_t>();
  const uint32_t width = encoded_width(d.at("encoding"), 3, d.at("network"));
  auto density_net = create_network(d.at("network"), width, density_out);
  auto direction = create_encoding(cfg.at("direction_encoding"), 3);
  const uint32_t color_in = density_net->padded_output_width() + direction->padded_output_width();
  c.forward_flop = forward_flop_per_sample(*density_net) + network_flop(cfg.at("color_network"), color_in, w.n_output_dims);
  if (is_grid(d.at("encoding"))) c.grids.push_back(grid_of(d.at("encoding"), 3));
  return c;
}

}  // namespace tinyfuse::bench
