// What every grid kernel shares: the launch description, where an input falls in a level, which
// parameters a corner reads, and feature loads / stores. The arithmetic itself is
// core/encodings/grid_math.h, the same functions the CPU grid calls.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/encodings/grid_math.h"
#include "cuda/common.cuh"

namespace tinyfuse::cuda::grid {

// One level as the kernels need it (a device array of these, uploaded once per encoding).
struct LevelInfo {
  float scale;          // position scale, float as the CPU uses it
  uint32_t resolution;  // vertices per axis
  uint32_t offset;      // first table entry of the level
  uint32_t size;        // table entries of the level
};

// The settings every kernel takes by value.
struct Launch {
  GridType type;
  GridHash hash;
  GridInterpolation interpolation;
  bool stochastic;
  uint32_t n_levels;
  const LevelInfo* levels;  // device, n_levels items
};

// Row-major (batch, width) matrix of F32 or F16 (a runtime flag: the branch is uniform, and it
// keeps the number of kernel instantiations down).
struct Matrix {
  void* data;
  int64_t ld;  // elements between rows
  bool half;
  __device__ float load(int64_t row, uint32_t col) const {
    return half ? __half2float(static_cast<const __half*>(data)[row * ld + col])
                : static_cast<const float*>(data)[row * ld + col];
  }
  __device__ void store(int64_t row, uint32_t col, float v) const {
    if (half)
      static_cast<__half*>(data)[row * ld + col] = __float2half_rn(v);
    else
      static_cast<float*>(data)[row * ld + col] = v;
  }
};

// Thread i of a (record, level) launch, record fastest (level-major).
__device__ __forceinline__ void level_and_record(int64_t i, int64_t batch, int64_t& record, uint32_t& level) {
  if (i < (int64_t(1) << 32) && batch < (int64_t(1) << 32)) {
    const uint32_t l = static_cast<uint32_t>(i) / static_cast<uint32_t>(batch);
    level = l;
    record = static_cast<uint32_t>(i) - l * static_cast<uint32_t>(batch);
  } else {
    level = static_cast<uint32_t>(i / batch);
    record = i - int64_t(level) * batch;
  }
}

// Thread i of a (record, level) launch, level fastest. 32-bit division while i fits (a 64-bit
// one costs many more instructions).
__device__ __forceinline__ void record_and_level(int64_t i, uint32_t n_levels, int64_t& record, uint32_t& level) {
  if (i < (int64_t(1) << 32)) {
    const uint32_t r = static_cast<uint32_t>(i) / n_levels;
    record = r;
    level = static_cast<uint32_t>(i) - r * n_levels;
  } else {
    record = i / n_levels;
    level = static_cast<uint32_t>(i - record * n_levels);
  }
}

template <uint32_t D>
struct Cell {
  uint32_t vertex[D];
  float w[D], dw[D];
};

template <uint32_t D>
__device__ __forceinline__ Cell<D> locate(const float* x, int64_t ldx, int64_t row, float scale,
                                          GridInterpolation interpolation) {
  Cell<D> c;
#pragma unroll
  for (uint32_t d = 0; d < D; ++d) grid_locate_axis(scale, x[row * ldx + d], interpolation, c.vertex[d], c.w[d], c.dw[d]);
  return c;
}

// A cell with the second derivatives of its weights, for the second-order input gradient.
template <uint32_t D>
struct SecondOrderCell : Cell<D> {
  float d2w[D];
};

template <uint32_t D>
__device__ __forceinline__ SecondOrderCell<D> locate_second_order(const float* x, int64_t ldx, int64_t row, float scale,
                                                                  GridInterpolation interpolation) {
  SecondOrderCell<D> c;
#pragma unroll
  for (uint32_t d = 0; d < D; ++d)
    grid_locate_axis(scale, x[row * ldx + d], interpolation, c.vertex[d], c.w[d], c.dw[d], c.d2w[d]);
  return c;
}

// Vertex of corner `corner` (bit d: one above along axis d).
template <uint32_t D>
__device__ __forceinline__ void corner_vertex(const Cell<D>& c, uint32_t corner, uint32_t* v) {
#pragma unroll
  for (uint32_t d = 0; d < D; ++d) v[d] = c.vertex[d] + ((corner >> d) & 1u);
}

// Global table entry (across levels) of vertex `v` in level `L`; its features start at entry * F.
template <uint32_t D>
__device__ __forceinline__ uint32_t entry_of(const Launch& g, const LevelInfo& L, const uint32_t* v) {
  return L.offset + grid_entry(g.type, g.hash, L.size, L.resolution, v, D);
}

// F features of type T from p; `vec`: p is aligned to the vector width (min(F * sizeof(T), 16)).
template <typename T, uint32_t F>
struct alignas(F * sizeof(T) < 16 ? F * sizeof(T) : 16) FeatureChunk {
  T v[F];
};

template <typename T, uint32_t F>
__device__ __forceinline__ void load_features(const T* p, bool vec, float* out) {
  if (vec) {
    const FeatureChunk<T, F> c = *reinterpret_cast<const FeatureChunk<T, F>*>(p);
#pragma unroll
    for (uint32_t f = 0; f < F; ++f) out[f] = to_float(c.v[f]);
  } else {
#pragma unroll
    for (uint32_t f = 0; f < F; ++f) out[f] = to_float(p[f]);
  }
}

template <typename T, uint32_t F>
bool features_aligned(const void* p) {
  constexpr size_t a = F * sizeof(T) < 16 ? F * sizeof(T) : 16;
  return reinterpret_cast<uintptr_t>(p) % a == 0;
}

// Calls fn(std::integral_constant<uint32_t, D>, std::integral_constant<uint32_t, F>) for the
// runtime dims (1-4) and features per level (1, 2, 4, 8): each kernel is instantiated for these.
template <typename Fn>
void dispatch_dims_features(uint32_t dims, uint32_t features, Fn&& fn) {
  auto with_features = [&](auto d) {
    switch (features) {
      case 1: fn(d, std::integral_constant<uint32_t, 1>{}); return;
      case 2: fn(d, std::integral_constant<uint32_t, 2>{}); return;
      case 4: fn(d, std::integral_constant<uint32_t, 4>{}); return;
      case 8: fn(d, std::integral_constant<uint32_t, 8>{}); return;
      default: throw UnsupportedError("internal: grid with " + std::to_string(features) + " features per level");
    }
  };
  switch (dims) {
    case 1: with_features(std::integral_constant<uint32_t, 1>{}); return;
    case 2: with_features(std::integral_constant<uint32_t, 2>{}); return;
    case 3: with_features(std::integral_constant<uint32_t, 3>{}); return;
    case 4: with_features(std::integral_constant<uint32_t, 4>{}); return;
    default: throw UnsupportedError("internal: grid with " + std::to_string(dims) + " dims");
  }
}

inline unsigned blocks_for_threads(int64_t n) { return static_cast<unsigned>((n + kThreadsPerBlock - 1) / kThreadsPerBlock); }

}  // namespace tinyfuse::cuda::grid
