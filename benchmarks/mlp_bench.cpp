#include "mlp_bench.h"

#include <algorithm>
#include <exception>
#include <vector>

#include "tinyfuse/buffer.h"
#include "tinyfuse/factory.h"
#include "tinyfuse/random.h"

namespace tinyfuse::bench {

namespace {

// Forward FLOP per sample: one multiply and one add per weight of every layer.
double forward_flop_per_sample(const Network& net) {
  double flop = 0;
  uint64_t in = net.input_width();
  for (uint32_t layer = 0; layer <= net.n_hidden_layers(); ++layer) {
    const uint64_t out = net.width(layer);
    flop += 2.0 * static_cast<double>(in * out);
    in = out;
  }
  return flop;
}

double forward_flop_per_sample(const DifferentiableObject& model) {
  if (const auto* net = dynamic_cast<const Network*>(&model)) return forward_flop_per_sample(*net);
  throw Error("tinyfuse-bench: the benchmark model is not a Network; cannot count its FLOP");
}

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

BuildOptions options_for(Device device) {
  BuildOptions o;
  o.device = device;
  return o;
}

void run_inference(Device device, const MlpCase& c, const TimingPlan& plan, uint64_t seed, CaseResult& r) {
  std::unique_ptr<Network> net = create_network(mlp_network_config(c.otype), kMlpInputs, kMlpOutputs, options_for(device));
  r.flop_per_sample = forward_flop_per_sample(*net);

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
  Model m = create_from_config(kMlpInputs, kMlpOutputs, mlp_training_config(c.otype), options_for(device), seed);
  r.flop_per_sample = 3.0 * forward_flop_per_sample(*m.network);

  const DifferentiableObject& model = *m.network;
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

std::string mlp_description() {
  return std::to_string(kMlpInputs) + "->" + std::to_string(kMlpNeurons) + "x" + std::to_string(kMlpHiddenLayers) +
         "->" + std::to_string(kMlpOutputs) + " ReLU MLP (output activation None)";
}

json mlp_network_config(const std::string& otype) {
  return {{"otype", otype},
          {"n_neurons", kMlpNeurons},
          {"n_hidden_layers", kMlpHiddenLayers},
          {"activation", "ReLU"},
          {"output_activation", "None"}};
}

json mlp_training_config(const std::string& otype) {
  return {{"loss", {{"otype", "L2"}}},
          {"optimizer", {{"otype", "Adam"}, {"learning_rate", 1e-3}}},
          {"network", mlp_network_config(otype)}};
}

std::string to_string(Mode m) { return m == Mode::Training ? "training" : "inference"; }

CaseResult run_mlp_case(Device device, const MlpCase& c, const TimingPlan& plan, uint64_t seed) {
  CaseResult r;
  r.device = tinyfuse::to_string(device);
  r.network = c.otype;
  r.mode = c.mode;
  r.batch = c.batch;
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
