// The workload suite (W1 image, W2 OneBlob, W3 NeRF field, W4 SDF, W4e SDF with the eikonal term):
// what each workload is, read
// from its JSON file in configs/ (the model's tiny-cuda-nn config, its widths, its target and its
// default batches per device). The same files feed the PyTorch and tinyfuse.tcnn runs
// (benchmarks/torch/torch_workloads.py), so every side builds the same model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tinyfuse/common.h"
#include "tinyfuse/object.h"

namespace tinyfuse::bench {

// What a workload learns (targets.h makes the samples).
enum class TargetKind { Image, Radiance, Sdf };

// What one training step does: the Trainer's step with the config's loss ("Supervised", every
// workload without a "step" field), or the eikonal step (eikonal_step.h: the loss holds the
// input gradient, so the step differentiates it).
struct StepSpec {
  enum class Kind { Supervised, Eikonal };
  Kind kind = Kind::Supervised;
  double eikonal_weight = 0;  // Eikonal: the weight of mean (|grad_x f| - 1)^2 beside the L1 term
};

struct WorkloadSpec {
  std::string id;           // "W1"
  std::string name;         // "image"
  std::string description;
  std::string upstream;     // where the config comes from
  std::string file;         // the JSON it was read from
  uint32_t n_input_dims = 0, n_output_dims = 0;
  TargetKind target = TargetKind::Image;
  StepSpec step;
  // The model: {"loss", "optimizer", "encoding", "network"} as tiny-cuda-nn reads it, or for the
  // NeRF field {"loss", "optimizer", "density", "direction_encoding", "color_network"}.
  json config;
  // Default log2 batch sizes per device ("cpu", "cuda") and mode.
  struct Batches {
    std::vector<int> training, inference;
  };
  Batches cpu_batches, cuda_batches;

  bool is_nerf_field() const { return config.contains("density"); }
  const Batches& batches(Device device) const { return device == Device::CPU ? cpu_batches : cuda_batches; }
};

// The folder holding w1_image.json ... (the source tree's benchmarks/workloads/configs).
std::string default_workload_dir();

// Reads every workload file of `dir` (w*.json) and returns those whose id is in `ids` ("W1", ...;
// "all" or an empty list: every one), in id order. Throws std::runtime_error naming the file and
// the field for a file that cannot be read or lacks a field, and naming the known ids for an id
// that no file has.
std::vector<WorkloadSpec> load_workloads(const std::string& dir, const std::vector<std::string>& ids);

// One workload file (the parser above uses it; tests call it on their own files).
WorkloadSpec parse_workload(const json& doc, const std::string& file);

}  // namespace tinyfuse::bench
