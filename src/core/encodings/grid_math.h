// The arithmetic of tiny-cuda-nn's multiresolution grid encodings, shared by the CPU and GPU
// backends: level scales and resolutions, the hash functions, how a grid vertex becomes a table
// entry, the interpolation kernels and the PCG32 helpers the Rng hash and stochastic
// interpolation draw from. Integer arithmetic is uint32 with wraparound, as in tiny-cuda-nn, so
// both backends pick the same table entries bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#ifndef TF_HOST_DEVICE
#if defined(__CUDACC__) || defined(__HIPCC__)
#define TF_HOST_DEVICE __host__ __device__
#else
#define TF_HOST_DEVICE
#endif
#endif

namespace tinyfuse {

// Backing storage of each level. Hash: dense while the level fits its table, hashed beyond.
// Dense: one entry per vertex. Tiled: at most base_resolution^dims entries, indexed modulo that.
enum class GridType : uint8_t { Hash, Dense, Tiled };
enum class GridHash : uint8_t { Prime, CoherentPrime, ReversedPrime, Rng, BaseConvert };
enum class GridInterpolation : uint8_t { Nearest, Linear, Smoothstep };

constexpr uint32_t kGridMaxDims = 4;
constexpr uint32_t kGridMaxLevels = 128;  // tiny-cuda-nn's MAX_N_LEVELS
constexpr uint32_t kGridStochasticSeed = 1337;
constexpr uint32_t kGridRngHashSeed = 1337;

// Position scale of a level: base_resolution * per_level_scale^level - 1, computed in float as
// tiny-cuda-nn does (the -1 makes base_resolution count vertices, not cells).
TF_HOST_DEVICE inline float grid_level_scale(uint32_t level, float log2_per_level_scale, uint32_t base_resolution) {
  return exp2f(static_cast<float>(level) * log2_per_level_scale) * static_cast<float>(base_resolution) - 1.0f;
}

// Vertices per axis of a level: ceil(scale) + 1.
TF_HOST_DEVICE inline uint32_t grid_level_resolution(float scale) {
  return static_cast<uint32_t>(ceilf(scale)) + 1u;
}

// ---- Hash functions (tiny-cuda-nn's formulas, uint32 wraparound) ----

// XOR of coordinate * factor over the dimensions.
TF_HOST_DEVICE inline uint32_t grid_xor_hash(const uint32_t* pos, uint32_t dims, const uint32_t* factors) {
  uint32_t h = 0;
  for (uint32_t d = 0; d < dims; ++d) h ^= pos[d] * factors[d];
  return h;
}

TF_HOST_DEVICE inline uint32_t grid_prime_hash(const uint32_t* pos, uint32_t dims) {
  const uint32_t f[7] = {1958374283u, 2654435761u, 805459861u, 3674653429u, 2097192037u, 1434869437u, 2165219737u};
  return grid_xor_hash(pos, dims, f);
}

// As Prime, but the first factor is 1: neighbouring vertices along x land in neighbouring
// entries, which keeps lookups of one cell close in memory.
TF_HOST_DEVICE inline uint32_t grid_coherent_prime_hash(const uint32_t* pos, uint32_t dims) {
  const uint32_t f[7] = {1u, 2654435761u, 805459861u, 3674653429u, 2097192037u, 1434869437u, 2165219737u};
  return grid_xor_hash(pos, dims, f);
}

TF_HOST_DEVICE inline uint32_t grid_reversed_prime_hash(const uint32_t* pos, uint32_t dims) {
  const uint32_t f[7] = {2165219737u, 1434869437u, 2097192037u, 3674653429u, 805459861u, 2654435761u, 1958374283u};
  return grid_xor_hash(pos, dims, f);
}

// k = (k + pos[d]) * 2531011 over the dimensions.
TF_HOST_DEVICE inline uint32_t grid_base_convert_hash(const uint32_t* pos, uint32_t dims) {
  uint32_t k = 0;
  for (uint32_t d = 0; d < dims; ++d) {
    k += pos[d];
    k *= 2531011u;
  }
  return k;
}

// ---- PCG32 (stream 1), for the Rng hash and stochastic interpolation ----

constexpr uint64_t kGridPcgMult = 6364136223846793005ULL;
constexpr uint64_t kGridPcgInc = 3;  // (stream 1 << 1) | 1

TF_HOST_DEVICE inline uint32_t grid_pcg_next(uint64_t& state) {
  const uint64_t old = state;
  state = old * kGridPcgMult + kGridPcgInc;
  const uint32_t xorshifted = static_cast<uint32_t>(((old >> 18u) ^ old) >> 27u);
  const uint32_t rot = static_cast<uint32_t>(old >> 59u);
  return (xorshifted >> rot) | (xorshifted << ((~rot + 1u) & 31));
}

// State after seeding with `seed` (one draw, add the seed, one more draw).
TF_HOST_DEVICE inline uint64_t grid_pcg_seeded(uint64_t seed) {
  uint64_t s = 0;
  grid_pcg_next(s);
  s += seed;
  grid_pcg_next(s);
  return s;
}

// Jumps `delta` steps ahead in O(log delta): the composition of delta affine steps
// s -> s * mult + inc, built by repeated squaring.
TF_HOST_DEVICE inline uint64_t grid_pcg_advance(uint64_t state, uint64_t delta) {
  uint64_t step_mult = kGridPcgMult, step_inc = kGridPcgInc;
  uint64_t total_mult = 1, total_inc = 0;
  while (delta > 0) {
    if (delta & 1u) {
      total_mult *= step_mult;
      total_inc = total_inc * step_mult + step_inc;
    }
    step_inc = (step_mult + 1) * step_inc;
    step_mult *= step_mult;
    delta >>= 1;
  }
  return total_mult * state + total_inc;
}

// 23-bit float in [0, 1) from one draw.
TF_HOST_DEVICE inline float grid_pcg_float(uint64_t& state) {
  const uint32_t bits = (grid_pcg_next(state) >> 9) | 0x3f800000u;
#if defined(__HIP_DEVICE_COMPILE__)
  const float f = __builtin_bit_cast(float, bits);  // HIP's device code has no memcpy
#elif defined(__CUDA_ARCH__)
  const float f = __uint_as_float(bits);
#else
  float f;
  memcpy(&f, &bits, 4);
#endif
  return f - 1.0f;
}

// Coordinates packed into a 64-bit jump distance (64 / dims bits each, XOR-combined) of a
// generator seeded with 1337; the hash is the draw found there.
TF_HOST_DEVICE inline uint32_t grid_rng_hash(const uint32_t* pos, uint32_t dims) {
  const uint32_t bits = 64 / dims;
  uint64_t step = 0;
  for (uint32_t d = 0; d < dims; ++d) step ^= static_cast<uint64_t>(pos[d]) << (d * bits);
  uint64_t s = grid_pcg_advance(grid_pcg_seeded(kGridRngHashSeed), step);
  return grid_pcg_next(s);
}

TF_HOST_DEVICE inline uint32_t grid_hash(GridHash h, const uint32_t* pos, uint32_t dims) {
  switch (h) {
    case GridHash::Prime: return grid_prime_hash(pos, dims);
    case GridHash::CoherentPrime: return grid_coherent_prime_hash(pos, dims);
    case GridHash::ReversedPrime: return grid_reversed_prime_hash(pos, dims);
    case GridHash::Rng: return grid_rng_hash(pos, dims);
    case GridHash::BaseConvert: return grid_base_convert_hash(pos, dims);
  }
  return 0;
}

// Largest resolution whose dense index cannot overflow uint32 for 0..4 dims.
TF_HOST_DEVICE inline uint32_t grid_max_dense_base(uint32_t dims) {
  switch (dims) {
    case 1: return 0xFFFFFFFFu;
    case 2: return 0xFFFFu;
    case 3: return 0x659u;
    case 4: return 0xFFu;
    default: return 0u;
  }
}

// Table entry (within its level) of grid vertex `pos`. The row-major dense index is used while
// the level's vertices fit its table; Hash levels that do not fit hash the vertex instead, and
// Dense/Tiled levels wrap the dense index around their table.
// (grid_entry before the reduction modulo the table size, for callers that reduce a power-of-two
// size with a mask.)
TF_HOST_DEVICE inline uint32_t grid_entry_unreduced(GridType type, GridHash hash, uint32_t table_size,
                                                   uint32_t resolution, const uint32_t* pos, uint32_t dims) {
  uint32_t stride = 1, index = 0;
  if (resolution <= grid_max_dense_base(dims)) {
    for (uint32_t d = 0; d < dims; ++d) {
      index += pos[d] * stride;
      stride *= resolution;
    }
  } else {
    stride = 0xFFFFFFFFu;
  }
  if (type == GridType::Hash && table_size < stride) index = grid_hash(hash, pos, dims);
  return index;
}

TF_HOST_DEVICE inline uint32_t grid_entry(GridType type, GridHash hash, uint32_t table_size, uint32_t resolution,
                                         const uint32_t* pos, uint32_t dims) {
  return grid_entry_unreduced(type, hash, table_size, resolution, pos, dims) % table_size;
}

// ---- Interpolation kernels ----

template <typename T>
TF_HOST_DEVICE inline T grid_smoothstep(T t) {
  return t * t * (T(3) - T(2) * t);
}

template <typename T>
TF_HOST_DEVICE inline T grid_smoothstep_derivative(T t) {
  return T(6) * t * (T(1) - t);
}

// d²(smoothstep)/dt², for the second-order input gradient.
template <typename T>
TF_HOST_DEVICE inline T grid_smoothstep_second_derivative(T t) {
  return T(6) - T(12) * t;
}

// x * scale + 0.5: fused (one rounding) in float as on the GPU; plain in double.
TF_HOST_DEVICE inline float grid_position(float scale, float x) { return fmaf(scale, x, 0.5f); }
TF_HOST_DEVICE inline double grid_position(double scale, double x) { return scale * x + 0.5; }

// Integer vertex below `p` as tiny-cuda-nn computes it: (uint32)(int)floor(p), so negative
// positions wrap around. Non-finite or out-of-range positions give vertex 0.
template <typename T>
TF_HOST_DEVICE inline uint32_t grid_vertex(T floor_p) {
  if (!(floor_p >= T(-2147483648.0) && floor_p < T(2147483648.0))) return 0u;
  return static_cast<uint32_t>(static_cast<int32_t>(floor_p));
}

TF_HOST_DEVICE inline float grid_floor(float p) { return floorf(p); }
TF_HOST_DEVICE inline double grid_floor(double p) { return floor(p); }

// Where coordinate `x` falls along one axis of a level of position scale `scale`: the vertex
// below, the interpolation weight `w` of the vertex above (after smoothstep) and dw/d(fraction).
// Nearest gives the fraction as its weight too; its users take only the vertex below.
template <typename T>
TF_HOST_DEVICE inline void grid_locate_axis(T scale, T x, GridInterpolation interpolation, uint32_t& vertex, T& w,
                                            T& dw) {
  const T p = grid_position(scale, x);
  const T fl = grid_floor(p);
  vertex = grid_vertex(fl);
  const T frac = p - fl;
  if (interpolation == GridInterpolation::Smoothstep) {
    w = grid_smoothstep(frac);
    dw = grid_smoothstep_derivative(frac);
  } else {
    w = frac;
    dw = T(1);
  }
}

// As above, plus d2w: the second derivative of w with respect to the fraction (0 for Linear,
// whose weight is linear in it, and for Nearest; smoothstep'' for Smoothstep).
template <typename T>
TF_HOST_DEVICE inline void grid_locate_axis(T scale, T x, GridInterpolation interpolation, uint32_t& vertex, T& w,
                                            T& dw, T& d2w) {
  grid_locate_axis(scale, x, interpolation, vertex, w, dw);
  const T p = grid_position(scale, x);
  d2w = interpolation == GridInterpolation::Smoothstep ? grid_smoothstep_second_derivative(p - grid_floor(p)) : T(0);
}

// Weight of corner `corner` of a cell (bit d: the vertex above along axis d) given the weights
// `w` of the upper vertices: the product of w[d] or 1 - w[d] over the axes.
template <typename T, uint32_t D>
TF_HOST_DEVICE inline T grid_corner_weight(const T* w, uint32_t corner) {
  T weight = T(1);
  for (uint32_t d = 0; d < D; ++d) weight *= ((corner >> d) & 1u) ? w[d] : T(1) - w[d];
  return weight;
}

// d(corner weight)/dx[axis]: +-scale * dw[axis] (upper / lower vertex along it) times the
// weights along the other axes.
template <typename T, uint32_t D>
TF_HOST_DEVICE inline T grid_corner_weight_dx(const T* w, const T* dw, T scale, uint32_t corner, uint32_t axis) {
  T weight = ((corner >> axis) & 1u) ? scale * dw[axis] : -scale * dw[axis];
  for (uint32_t d = 0; d < D; ++d)
    if (d != axis) weight *= ((corner >> d) & 1u) ? w[d] : T(1) - w[d];
  return weight;
}

// The weight with which corner `corner`'s features enter sum_d v[d] * dy/dx[d]: the directional
// derivative of the interpolation along `v`. dL/dx = J^T dL/dy is linear in the corner features
// with these weights for v = e_d, so the second-derivative pass (given v = dL2/d(dL/dx)) sends
// dL2/dparams = coefficient * dL/dy and dL2/d(dL/dy) = sum over corners of coefficient * features.
template <typename T, uint32_t D>
TF_HOST_DEVICE inline T grid_corner_directional_weight(const T* w, const T* dw, T scale, const T* v, uint32_t corner) {
  T sum = T(0);
  for (uint32_t d = 0; d < D; ++d) sum += v[d] * grid_corner_weight_dx<T, D>(w, dw, scale, corner, d);
  return sum;
}

// d²(corner weight)/dx[a]dx[b]. Across two axes: the two first derivatives (+-scale * dw, + for
// the upper vertex) times the weights along the other axes. Along one axis twice: +-scale² * d2w
// times the others' weights (0 for Linear: the weight is linear along each axis).
template <typename T, uint32_t D>
TF_HOST_DEVICE inline T grid_corner_weight_dxdx(const T* w, const T* dw, const T* d2w, T scale, uint32_t corner,
                                                uint32_t a, uint32_t b) {
  const T sign_a = ((corner >> a) & 1u) ? T(1) : T(-1), sign_b = ((corner >> b) & 1u) ? T(1) : T(-1);
  T weight = a == b ? sign_a * scale * scale * d2w[a] : sign_a * scale * dw[a] * sign_b * scale * dw[b];
  for (uint32_t d = 0; d < D; ++d)
    if (d != a && d != b) weight *= ((corner >> d) & 1u) ? w[d] : T(1) - w[d];
  return weight;
}

// The weight with which corner `corner`'s features dotted with dL/dy enter dL2/dx[e] in the
// second-order pass: sum_d v[d] * d²(corner weight)/dx[d]dx[e], v = dL2/d(dL/dx). (dL/dx is
// sum over corners of d(corner weight)/dx times features·dL/dy, so its derivative by x[e] is this.)
template <typename T, uint32_t D>
TF_HOST_DEVICE inline T grid_corner_hessian_weight(const T* w, const T* dw, const T* d2w, T scale, const T* v,
                                                   uint32_t corner, uint32_t e) {
  T sum = T(0);
  for (uint32_t d = 0; d < D; ++d) sum += v[d] * grid_corner_weight_dxdx<T, D>(w, dw, d2w, scale, corner, d, e);
  return sum;
}

// Stochastic interpolation's sample for record `i` of a batch of `n` at `level`: the first
// float of a generator seeded with (1337 << 32) | (i + level * n), uint32 arithmetic.
TF_HOST_DEVICE inline float grid_stochastic_sample(uint32_t i, uint32_t level, uint32_t n) {
  const uint32_t idx = i + level * n;
  uint64_t s = grid_pcg_seeded((static_cast<uint64_t>(kGridStochasticSeed) << 32) | idx);
  return grid_pcg_float(s);
}

}  // namespace tinyfuse
