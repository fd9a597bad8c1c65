#include "mlp_bench.h"

#include <algorithm>
#include <exception>
#include <vector>

#include "tinyfuse/buffer.h"
#include "tinyfuse/factory.h"
#include "tinyfuse/random.h"

namespace tinyfuse::bench {

namespace {

// Fills `dst` (on any device, any dtype) with uniform values in [lo, hi). FP32 on the CPU is
// written in place; anything else goes through a host staging buffer and copy_tensor.
void fill_uniform(Pcg32& rng, const TensorView& dst, float lo, float hi, std::vector<float>& staging) {
  const size_t n = static_cast<size_t>(dst.numel());
  float* p = nullptr;
  const bool in_place = dst.device == Device::CPU && dst.dtype == DType::F32 && dst.contiguous();
  if (in_place) {
    p = static_cast<float*>(dst.data);
  } else {
    staging.resize(n);
    p = staging.data();
  }
  for (size_t i = 0; i < n; ++i) p[i] = rng.uniform(lo, hi);
  if (!in_place) copy_tensor(dst, TensorView::matrix(staging.data(), dst.rows(), dst.cols()));
}

}  // namespace

std::string precision_name(DType t) {
  switch (t) {
    case DType::F32: return "fp32";
    case DType::F16: return "fp16";
    case DType::BF16: return "bf16";
    case DType::F64: return "fp64";
  }
  return "unknown";
}

const std::vector<BenchNetwork>& bench_networks(Device device) {
  static const std::vector<BenchNetwork> cpu = {
      {"PortableMLP", "fp32", true},
      {"CutlassMLP", "fp32", true},
      {"FullyFusedMLP", "fp32", false},
  };
  static const std::vector<BenchNetwork> cuda = {
      {"PortableMLP", "fp32", true},
      {"BlasLtMLP", "fp32", true},
      {"BlasLtMLPFP16", "fp16", true},
      {"FullyFusedMLP", "fp16", true},
      {"Width64FusedMLP", "fp16", true, /*inference_only=*/true, /*only_width=*/64},
  };
  return device == Device::CPU ? cpu : cuda;
}

bool bench_case_applies(Device device, const std::string& otype, Mode mode, uint32_t width) {
  for (const BenchNetwork& n : bench_networks(device))
    if (n.otype == otype)
      return !(n.inference_only && mode == Mode::Training) && (n.only_width == 0 || n.only_width == width);
  return true;  // not in the table: run it and let it report what it cannot do
}

std::string expected_precision(Device device, const std::string& otype) {
  for (const BenchNetwork& n : bench_networks(device))
    if (n.otype == otype) return n.precision;
  return "fp32";
}

// Forward FLOP per sample: one multiply and one add per weight of every layer.
double forward_flop_per_sample(const DifferentiableObject& model) {
  const auto* net = dynamic_cast<const Network*>(&model);
  if (!net) throw Error("tinyfuse-bench: the benchmark model is not a Network; cannot count its FLOP");
  double flop = 0;
  uint64_t in = net->input_width();
  for (uint32_t layer = 0; layer <= net->n_hidden_layers(); ++layer) {
    const uint64_t out = net->width(layer);
    flop += 2.0 * static_cast<double>(in * out);
    in = out;
  }
  return flop;
}

void describe_dtypes(const DifferentiableObject& model, CaseResult& r) {
  r.precision = precision_name(model.param_dtype());
  r.param_dtype = to_string(model.param_dtype());
  r.input_dtype = to_string(model.input_dtype());
  r.output_dtype = to_string(model.output_dtype());
}

namespace {

BuildOptions options_for(Device device) {
  BuildOptions o;
  o.device = device;
  return o;
}

void run_inference(Device device, const MlpCase& c, const TimingPlan& plan, uint64_t seed, CaseResult& r) {
  std::unique_ptr<Network> net = create_network(mlp_network_config(c.otype, c.width), c.width, c.width, options_for(device));
  describe_dtypes(*net, r);
  r.flop_per_sample = forward_flop_per_sample(*net);
  r.bytes_per_sample = static_cast<double>(net->input_width() * dtype_size(net->input_dtype()) +
                                           net->output_width() * dtype_size(net->output_dtype()));

  const int64_t n_params = static_cast<int64_t>(net->n_params());
  std::vector<float> host_params(static_cast<size_t>(n_params));
  Pcg32 param_rng(seed);
  net->initialize_params(param_rng, host_params.data());
  Buffer params(device, static_cast<size_t>(n_params) * dtype_size(net->param_dtype()));
  const TensorView pv = params.vector(net->param_dtype(), n_params);
  copy_tensor(pv, TensorView::vector(host_params.data(), n_params));
  net->set_params(pv, pv, TensorView{});

  Buffer input(device, static_cast<size_t>(c.batch) * net->input_width() * dtype_size(net->input_dtype()));
  Buffer output(device, static_cast<size_t>(c.batch) * net->padded_output_width() * dtype_size(net->output_dtype()));
  const TensorView in = input.matrix(net->input_dtype(), c.batch, net->input_width());
  const TensorView out = output.matrix(net->output_dtype(), c.batch, net->padded_output_width());

  Pcg32 rng(seed + 1);
  std::vector<float> staging;
  r.seconds = time_runs(
      plan, [&] { fill_uniform(rng, in, -1.0f, 1.0f, staging); },
      [&] {
        net->inference(in, out);
        synchronize(device, in.stream);
      });
}

void run_training(Device device, const MlpCase& c, const TimingPlan& plan, uint64_t seed, CaseResult& r) {
  Model m = create_from_config(c.width, c.width, mlp_training_config(c.otype, c.width), options_for(device), seed);
  r.flop_per_sample = 3.0 * forward_flop_per_sample(*m.network);

  const DifferentiableObject& model = *m.network;
  describe_dtypes(model, r);
  r.bytes_per_sample = static_cast<double>(model.input_width() * dtype_size(model.input_dtype()) +
                                           model.output_width() * dtype_size(model.output_dtype()));
  Buffer input(device, static_cast<size_t>(c.batch) * model.input_width() * dtype_size(model.input_dtype()));
  Buffer target(device, static_cast<size_t>(c.batch) * model.output_width() * dtype_size(model.output_dtype()));
  const TensorView in = input.matrix(model.input_dtype(), c.batch, model.input_width());
  const TensorView tg = target.matrix(model.output_dtype(), c.batch, model.output_width());

  Pcg32 rng(seed + 1);
  std::vector<float> staging;
  float loss = 0;
  r.seconds = time_runs(
      plan,
      [&] {
        fill_uniform(rng, in, -1.0f, 1.0f, staging);
        fill_uniform(rng, tg, 0.0f, 1.0f, staging);
      },
      [&] { loss = m.trainer->training_step(in, tg); });  // reads the loss back: the step is done
  r.last_loss = loss;
}

}  // namespace

std::string mlp_description(uint32_t width) {
  return std::to_string(width) + "->" + std::to_string(width) + "x" + std::to_string(kMlpHiddenLayers) + "->" +
         std::to_string(width) + " ReLU MLP (output activation None)";
}

json mlp_network_config(const std::string& otype, uint32_t width) {
  return {{"otype", otype},
          {"n_neurons", width},
          {"n_hidden_layers", kMlpHiddenLayers},
          {"activation", "ReLU"},
          {"output_activation", "None"}};
}

json mlp_training_config(const std::string& otype, uint32_t width) {
  return {{"loss", {{"otype", "L2"}}},
          {"optimizer", {{"otype", "Adam"}, {"learning_rate", 1e-3}}},
          {"network", mlp_network_config(otype, width)}};
}

std::string to_string(Mode m) { return m == Mode::Training ? "training" : "inference"; }

CaseResult run_mlp_case(Device device, const MlpCase& c, const TimingPlan& plan, uint64_t seed) {
  CaseResult r;
  r.device = tinyfuse::to_string(device);
  r.network = c.otype;
  r.mode = c.mode;
  r.batch = c.batch;
  r.width = c.width;
  try {
    if (c.mode == Mode::Training)
      run_training(device, c, plan, seed, r);
    else
      run_inference(device, c, plan, seed, r);
    r.ok = true;
  } catch (const std::exception& e) {
    r.ok = false;
    r.error = e.what();
  }
  return r;
}

void probe_device(Device device) {
  create_network(mlp_network_config("CutlassMLP"), kMlpInputs, kMlpOutputs, options_for(device));
}

}  // namespace tinyfuse::bench
