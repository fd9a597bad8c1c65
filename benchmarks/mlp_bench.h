// The benchmarked network: a 64->64x2->64 ReLU MLP (output activation None), run for inference
// (network->inference) or training (Trainer::training_step, L2 loss, Adam) at one batch size.
#pragma once

#include <cstdint>
#include <string>

#include "timing.h"
#include "tinyfuse/common.h"
#include "tinyfuse/object.h"

namespace tinyfuse::bench {

constexpr uint32_t kMlpInputs = 64, kMlpNeurons = 64, kMlpHiddenLayers = 2, kMlpOutputs = 64;

// "64->64x2->64 ReLU MLP (output activation None)"
std::string mlp_description();
// The "network" part of the config, for `otype` (PortableMLP, CutlassMLP, ...).
json mlp_network_config(const std::string& otype);
// The whole training config: {"loss": L2, "optimizer": Adam, "network": ...}.
json mlp_training_config(const std::string& otype);

enum class Mode { Inference, Training };
std::string to_string(Mode m);

struct MlpCase {
  std::string otype;
  Mode mode = Mode::Inference;
  int64_t batch = 0;
};

struct CaseResult {
  std::string device, network;  // "cpu", otype
  Mode mode = Mode::Inference;
  int64_t batch = 0;
  double flop_per_sample = 0;  // forward: 2*sum(in*out) over the layers; training: 3x that
  Stats seconds;               // per call
  double last_loss = 0;        // training only: the loss of the last step
  bool ok = false;
  std::string error;           // when !ok

  double samples_per_second() const { return static_cast<double>(batch) / seconds.median; }
  double gflops() const { return samples_per_second() * flop_per_sample * 1e-9; }
};

// Builds the network (or trainer) on `device` and times it. tinyfuse errors (and other
// exceptions) are caught and returned as a result with ok == false.
CaseResult run_mlp_case(Device device, const MlpCase& c, const TimingPlan& plan, uint64_t seed);

// Throws the tinyfuse::Error create_network gives when `device` cannot build the benchmark network.
void probe_device(Device device);

}  // namespace tinyfuse::bench
