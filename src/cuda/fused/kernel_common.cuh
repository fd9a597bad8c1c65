// What the fused forward and backward kernels share: the tiling, where each layer's weights sit
// in global and shared memory, staging weights into shared memory, and guarded fragment-sized
// global loads and stores.
//
// Tiling. A block of kWarpsPerBlock warps processes kWarpsPerBlock * kRows consecutive batch rows
// (a tile); each warp owns kRows = 16 * kMTiles of them for the whole depth of the network, so
// warps never exchange activations. Blocks loop over tiles (grid-stride). Weights live in
// shared memory: all layers at once when they fit the budget ("resident": staged once per
// block), otherwise one layer at a time, restaged for every tile (two barriers per layer).
//
// Shared-memory layout of a layer (out x in weights): row-major with row stride in + 8 elements.
// The 16-byte pad puts the 8 rows of every 8x8 ldmatrix block into 8 different bank groups
// ((2 in + 16) mod 128 bytes is an odd multiple of 16 for every in that is a multiple of 16).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/fused/fused_activation_math.cuh"
#include "cuda/fused/launch.h"
#include "cuda/common.cuh"
#include "tinyfuse/errors.h"

namespace tinyfuse::cuda::fused {

constexpr int kWarpsPerBlock = 4;
constexpr int kSmemPad = 8;  // elements of padding per shared-memory weight row

// Rows per warp: as many 16-row tiles as the registers allow, so that every weight fragment read
// from shared memory feeds several products (accumulators: 4 x width / 8 floats per 16 rows).
template <int WIDTH>
struct Tiling {
  static_assert(WIDTH == 16 || WIDTH == 32 || WIDTH == 64 || WIDTH == 128, "hidden width must be 16, 32, 64 or 128");
  static constexpr int kMTiles = WIDTH <= 32 ? 4 : WIDTH == 64 ? 2 : 1;
  static constexpr int kRows = 16 * kMTiles;
  static constexpr int kNTiles = WIDTH / 8;   // 8-column accumulator tiles of a hidden layer
  static constexpr int kKSteps = WIDTH / 16;  // 16-deep products over a hidden layer's input
  static constexpr int kBlockRows = kWarpsPerBlock * kRows;
};

// The shape as kernels see it (the hidden width is a template parameter).
struct KernelShape {
  int in_width, out_width, n_hidden;
  Activation act, out_act;
  bool resident;           // all layers' weights in shared memory at once
  bool hidden_deriv_is_y;  // backward reads act' of hidden layers from y (derivative_from_y)
};

inline KernelShape kernel_shape(const FusedShape& s, bool resident) {
  return {s.in_width, s.out_width, s.n_hidden, s.act, s.out_act, resident, derivative_from_y(s.act)};
}

// Layer l (0 .. n_hidden): inputs and outputs, offsets of its weights in the parameters and in
// shared memory (resident layout; everything sits at 0 otherwise).
__host__ __device__ inline int layer_in(int width, const KernelShape& s, int l) { return l == 0 ? s.in_width : width; }
__host__ __device__ inline int layer_out(int width, const KernelShape& s, int l) {
  return l == s.n_hidden ? s.out_width : width;
}
__host__ __device__ inline int64_t layer_weight_offset(int width, const KernelShape& s, int l) {
  return l == 0 ? 0 : static_cast<int64_t>(width) * s.in_width + static_cast<int64_t>(l - 1) * width * width;
}
__host__ __device__ inline int64_t layer_smem_elems(int width, const KernelShape& s, int l) {
  return static_cast<int64_t>(layer_out(width, s, l)) * (layer_in(width, s, l) + kSmemPad);
}
__host__ __device__ inline int64_t layer_smem_offset(int width, const KernelShape& s, int l) {
  if (!s.resident || l == 0) return 0;
  return layer_smem_elems(width, s, 0) + static_cast<int64_t>(l - 1) * width * (width + kSmemPad);
}

// f(std::integral_constant<int, W>{}) for a hidden width W of the general kernels (16, 32, 64 or
// 128): the one switch from a network's width to a kernel instance; other widths are an error.
template <typename F>
auto with_hidden_width(int width, F&& f) {
  switch (width) {
    case 16: return f(std::integral_constant<int, 16>{});
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
  }
  throw UnsupportedError("internal: fused MLP width " + std::to_string(width));
}

// Shared memory a launch needs, and whether every layer fits the budget at once.
struct SmemPlan {
  bool resident;
  size_t bytes;
};
inline SmemPlan plan_smem(const FusedShape& shape, size_t elem_bytes, size_t resident_budget) {
  const KernelShape s = kernel_shape(shape, true);
  int64_t total = 0, largest = 0;
  for (int l = 0; l <= s.n_hidden; ++l) {
    const int64_t e = layer_smem_elems(shape.width, s, l);
    total += e;
    largest = e > largest ? e : largest;
  }
  if (static_cast<size_t>(total) * elem_bytes <= resident_budget) return {true, static_cast<size_t>(total) * elem_bytes};
  return {false, static_cast<size_t>(largest) * elem_bytes};
}

// Device code from here on: the host-only units (plan.cpp, launch.cpp, launch_config.cpp) include
// this header for the shapes above and are compiled by the host compiler.
#if defined(__CUDACC__) || defined(__HIPCC__)

// Copies one layer's (rows x cols) weights into shared memory (row stride cols + kSmemPad), by
// every thread of the block. 16-byte loads when the parameters allow them.
template <typename T>
__device__ __forceinline__ void stage_weights(T* dst, const T* src, int rows, int cols) {
  const int stride = cols + kSmemPad;
  if ((reinterpret_cast<uintptr_t>(src) & 15) == 0) {
    const int per_row = cols / 8;
    const int total = rows * per_row;
    for (int i = threadIdx.x; i < total; i += blockDim.x) {
      const int r = i / per_row, c = (i - r * per_row) * 8;
      *reinterpret_cast<uint4*>(dst + r * stride + c) =
          __ldg(reinterpret_cast<const uint4*>(src + static_cast<int64_t>(r) * cols + c));
    }
  } else {
    const uint16_t* s16 = reinterpret_cast<const uint16_t*>(src);
    uint16_t* d16 = reinterpret_cast<uint16_t*>(dst);
    const int total = rows * cols;
    for (int i = threadIdx.x; i < total; i += blockDim.x) {
      const int r = i / cols, c = i - r * cols;
      d16[r * stride + c] = __ldg(s16 + i);
    }
  }
}

// Stages every layer (resident) or layer l only (streaming) and waits for the block.
template <int WIDTH, typename T>
__device__ __forceinline__ void stage_all_layers(T* smem, const T* weights, const KernelShape& s) {
  for (int l = 0; l <= s.n_hidden; ++l)
    stage_weights(smem + layer_smem_offset(WIDTH, s, l), weights + layer_weight_offset(WIDTH, s, l),
                  layer_out(WIDTH, s, l), layer_in(WIDTH, s, l));
  __syncthreads();
}
template <int WIDTH, typename T>
__device__ __forceinline__ void stage_one_layer(T* smem, const T* weights, const KernelShape& s, int l) {
  __syncthreads();  // every warp is done with the previous layer
  stage_weights(smem, weights + layer_weight_offset(WIDTH, s, l), layer_out(WIDTH, s, l), layer_in(WIDTH, s, l));
  __syncthreads();
}

// Rounding to the storage type, kept in float.
template <typename T>
__device__ __forceinline__ float round_to(float v) {
  return to_float(from_float<T>(v));
}

// Two adjacent elements (one fragment register) of a row-major matrix; zero past the batch.
__device__ __forceinline__ uint32_t load_pair(const void* base, int64_t ld, int64_t row, int col, int64_t batch) {
  if (row >= batch) return 0u;
  return __ldg(reinterpret_cast<const uint32_t*>(static_cast<const uint16_t*>(base) + row * ld + col));
}
__device__ __forceinline__ void store_pair(void* base, int64_t ld, int64_t row, int col, int64_t batch, uint32_t v) {
  if (row < batch) *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(base) + row * ld + col) = v;
}

// act'(z), read from the saved value v: z itself, or y where derivative_from_y(act).
__device__ __forceinline__ float derivative_from_saved(Activation act, float v, bool saved_is_y) {
  if (saved_is_y) {
    switch (act) {
      case Activation::None: return 1.0f;
      case Activation::ReLU: return v > 0.0f ? 1.0f : 0.0f;  // y > 0 exactly where z > 0
      case Activation::LeakyReLU: return v > 0.0f ? 1.0f : kLeakyReluSlope;
      default: break;
    }
  }
  return fused_activate_derivative(act, v);
}

#endif  // __CUDACC__ || __HIPCC__

}  // namespace tinyfuse::cuda::fused
