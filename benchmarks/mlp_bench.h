// The benchmarked network: an n->n x2->n ReLU MLP (output activation None; n = 64 by default),
// run for inference (network->inference) or training (Trainer::training_step, L2 loss, Adam) at
// one batch size. This file is the CPU path (steady_clock); gpu_bench.h has the CUDA one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "timing.h"
#include "tinyfuse/common.h"
#include "tinyfuse/object.h"

namespace tinyfuse::bench {

constexpr uint32_t kMlpInputs = 64, kMlpNeurons = 64, kMlpHiddenLayers = 2, kMlpOutputs = 64;

// "64->64x2->64 ReLU MLP (output activation None)"
std::string mlp_description(uint32_t width = kMlpNeurons);
// The "network" part of the config, for `otype` (PortableMLP, CutlassMLP, ...), `width` neurons.
json mlp_network_config(const std::string& otype, uint32_t width = kMlpNeurons);
// The whole training config: {"loss": L2, "optimizer": Adam, "network": ...}.
json mlp_training_config(const std::string& otype, uint32_t width = kMlpNeurons);

enum class Mode { Inference, Training };
std::string to_string(Mode m);

struct MlpCase {
  std::string otype;
  Mode mode = Mode::Inference;
  int64_t batch = 0;
  uint32_t width = kMlpNeurons;  // inputs = neurons = outputs
};

// "fp32" / "fp16" / "bf16" / "fp64": the names the PyTorch side (benchmarks/torch) uses.
std::string precision_name(DType compute_dtype);

// The networks tinyfuse-bench knows for a device, in run order. `precision` is what the otype
// computes in (used to pick the PyTorch figures and the matmul ceiling of a network that failed
// to build; a built network reports its own). Those with `by_default` run without --networks;
// adding a network to the benchmark is one line in mlp_bench.cpp.
struct BenchNetwork {
  std::string otype;
  std::string precision;
  bool by_default = true;
  bool inference_only = false;  // no training rows (the network cannot train)
  uint32_t only_width = 0;      // runs this width only (0: any)
};
const std::vector<BenchNetwork>& bench_networks(Device device);
// Whether tinyfuse-bench makes a row for `otype` in this mode and width: false only for what the
// table marks as impossible (training an inference-only network, another width of a fixed one).
bool bench_case_applies(Device device, const std::string& otype, Mode mode, uint32_t width);
// The table's precision for `otype` on `device`, or "fp32" for an otype it does not list.
std::string expected_precision(Device device, const std::string& otype);

struct CaseResult {
  std::string device, network;  // "cpu", otype
  Mode mode = Mode::Inference;
  int64_t batch = 0;
  uint32_t width = kMlpNeurons;
  // The network's dtypes (precision_name of the parameter dtype; empty when it failed to build).
  std::string precision, param_dtype, input_dtype, output_dtype;
  double flop_per_sample = 0;  // forward: 2*sum(in*out) over the layers; training: 3x that
  // Least memory traffic per sample (see README): inference reads the input and writes the
  // output; training reads the input and the (FP32 on GPUs) target.
  double bytes_per_sample = 0;
  // GPU runs: how many distinct input (and target) buffers the runs cycle through, and their bytes.
  int input_buffers = 0;
  double input_bytes = 0;
  bool loss_finite = true;     // training: last_loss is finite
  Stats seconds;               // per call
  Stats host_seconds;          // GPU runs: host time spent queuing each call (inside the timed span)
  // GPU inference with as many input as output bytes: a kernel that only copies the input to the
  // output, timed the same way right after the network (copy_reference.h).
  std::optional<Stats> copy_seconds;
  double last_loss = 0;        // training only: the loss of the last step
  bool ok = false;
  std::string error;           // when !ok

  double samples_per_second() const { return static_cast<double>(batch) / seconds.median; }
  double gflops() const { return samples_per_second() * flop_per_sample * 1e-9; }
};

// Forward FLOP per sample of a Network: 2*sum(in*out) over its layers (throws for other objects).
double forward_flop_per_sample(const DifferentiableObject& model);
// Fills r.precision and the dtype names from the model.
void describe_dtypes(const DifferentiableObject& model, CaseResult& r);

// Builds the network (or trainer) on `device` and times it. tinyfuse errors (and other
// exceptions) are caught and returned as a result with ok == false.
CaseResult run_mlp_case(Device device, const MlpCase& c, const TimingPlan& plan, uint64_t seed);

// Throws the tinyfuse::Error create_network gives when `device` cannot build the benchmark network.
void probe_device(Device device);

}  // namespace tinyfuse::bench
