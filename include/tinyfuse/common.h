// Basic vocabulary shared by every layer: devices, element types, gradient modes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tinyfuse {

enum class Device { CPU, CUDA };
enum class DType { F32, F16, BF16, F64 };

// What backward() does with parameter gradients (tiny-cuda-nn's EGradientMode).
enum class GradientMode {
  Ignore,      // do not compute parameter gradients
  Overwrite,   // gradients = dL/dparams
  Accumulate,  // gradients += dL/dparams
};

// Opaque stream handle: a cudaStream_t / hipStream_t on GPUs, ignored on the CPU.
using Stream = void*;

std::size_t dtype_size(DType t);
std::string to_string(Device d);
std::string to_string(DType t);
std::string to_string(GradientMode m);

// tiny-cuda-nn's helper: smallest multiple of `multiple` that is >= value.
template <typename T>
constexpr T next_multiple(T value, T multiple) {
  return ((value + multiple - 1) / multiple) * multiple;
}

}  // namespace tinyfuse
