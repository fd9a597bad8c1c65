// What a workload row's outputs are checked with: the loss a config names, computed on the host in
// double (for the first step's loss and the inference rows' error against the target), copies of
// device views to the host, and the CPU FP64 reference of a model with the device's parameters.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tinyfuse/object.h"
#include "workloads/spec.h"

namespace tinyfuse::bench {

// The mean loss of `n` rows of predictions ((n, pred_stride) row-major, the first n_out columns
// used) against targets ((n, n_out)), as the library's loss `otype` defines it (docs/CONFIG.md):
// L2, L1 and RelativeL2 (matched case-insensitively); nullopt for the others.
std::optional<double> host_loss(const std::string& otype, const float* pred, int64_t pred_stride, const float* target,
                                int64_t n, int64_t n_out);

// A (rows, cols) view on any device and of any dtype, as FP32 on the host (waits for it).
std::vector<float> to_host(const TensorView& view);

// The relative tolerance of outputs computed in `param_dtype` against the FP64 reference:
// FP32 1e-4, FP16 2e-2, BF16 5e-2 (of 1 + the largest reference output).
double reference_tolerance(DType param_dtype);

// Outputs of the workload's model with `params` (its parameters as FP32 host values, in its
// layout) on the CPU in FP64 for `n` rows of `input` ((n, n_input_dims) host FP32): (n, padded
// output width) row-major.
std::vector<double> cpu_reference_outputs(const WorkloadSpec& w, const std::vector<float>& params, const float* input,
                                          int64_t n, uint32_t* padded_width);

// The same model's gradient of its first output with respect to the input, (n, n_input_dims), in
// FP64: analytically (forward with input gradients prepared, backward of ones) ...
std::vector<double> cpu_reference_input_gradients(const WorkloadSpec& w, const std::vector<float>& params,
                                                  const float* input, int64_t n);
// ... and by central differences of its inference with step h (independent of the backward code).
std::vector<double> cpu_finite_difference_gradients(const WorkloadSpec& w, const std::vector<float>& params,
                                                    const float* input, int64_t n, double h);

}  // namespace tinyfuse::bench
