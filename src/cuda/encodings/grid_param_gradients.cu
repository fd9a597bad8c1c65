// Parameter gradients of the grid, first order (backward) and second order
// (backward_backward_input), summed in one of two ways:
//
// fast (default): float atomicAdd into an FP32 buffer (the gradients themselves for FP32
//   parameters; scratch converted afterwards for FP16); the leading small, heavily shared levels
//   summed per block in shared memory first (shared_levels() decides which). The order in which
//   the hardware applies the atomics varies, so the last bits of a sum vary from run to run.
// deterministic: each contribution c becomes the integer round(c * 2^s_l) and is added with a
//   64-bit integer atomicAdd; integer addition is associative, so the sum is the same bits
//   whatever the order. s_l is chosen per level from a bound on the level's total |contribution|
//   (batch * max |dL/doutput| times the largest total corner weight of a record), so no sum can
//   overflow (2^62 headroom under 2^63): every contribution keeps about 62 - log2(batch) bits
//   relative to the largest possible sum, more than FP32's 24. A non-finite dL/doutput in a
//   level makes that level's gradients NaN.
#include "cuda/dependent_launch.cuh"
#include "cuda/developer_knob.h"
#include "cuda/encodings/grid_kernels.cuh"

#include <algorithm>
#include <cfloat>

#include "tinyfuse/buffer.h"

namespace tinyfuse::cuda::grid {

namespace {

// Where contributions go.
struct Sink {
  float* f32;                      // fast
  bool vec;                        // f32 aligned for float2 / float4 atomics
  unsigned long long* fixed;       // deterministic
  const double* to_fixed;          // deterministic: 2^s_l per level
};

template <uint32_t F>
__device__ __forceinline__ void add_fast(const Sink& s, size_t first, const float* c) {
  float* dst = s.f32 + first;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(TINYFUSE_WITH_HIP)
  // Hopper adds float2 / float4 atomically per component in one request.
  if (F >= 2 && s.vec) {
    if constexpr (F == 2) {
      atomicAdd(reinterpret_cast<float2*>(dst), make_float2(c[0], c[1]));
      return;
    } else if constexpr (F >= 4) {
#pragma unroll
      for (uint32_t f = 0; f < F; f += 4)
        atomicAdd(reinterpret_cast<float4*>(dst + f), make_float4(c[f], c[f + 1], c[f + 2], c[f + 3]));
      return;
    }
  }
#endif
#pragma unroll
  for (uint32_t f = 0; f < F; ++f) atomicAdd(dst + f, c[f]);
}

// Corners k and k + 1 (the two ends of the cell along axis 0) often fall in one 16-byte-aligned
// pair of entries: Dense and Tiled levels store them side by side, and the tiny-cuda-nn hashes
// multiply axis 0 by 1, so x and x + 1 differ in bit 0 alone when x is even. With F of 1 or 2 one
// vector atomic (sm_90) then adds both (a quarter fewer atomics in a 2-D or 3-D grid).
template <uint32_t F>
__device__ __forceinline__ void add_fast_pair(const Sink& s, uint32_t e0, const float* c0, uint32_t e1,
                                              const float* c1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(TINYFUSE_WITH_HIP)
  if constexpr (F <= 2) {
    if (s.vec && (e0 ^ e1) == 1u) {
      const bool in_order = e0 < e1;  // values chosen, not pointers (which would put c0, c1 on the stack)
      float* dst = s.f32 + size_t(e0 & ~1u) * F;
      if constexpr (F == 2)
        atomicAdd(reinterpret_cast<float4*>(dst), in_order ? make_float4(c0[0], c0[1], c1[0], c1[1])
                                                           : make_float4(c1[0], c1[1], c0[0], c0[1]));
      else
        atomicAdd(reinterpret_cast<float2*>(dst), in_order ? make_float2(c0[0], c1[0]) : make_float2(c1[0], c0[0]));
      return;
    }
  }
#endif
  add_fast<F>(s, size_t(e0) * F, c0);
  add_fast<F>(s, size_t(e1) * F, c1);
}

template <uint32_t F>
__device__ __forceinline__ void add_fixed(const Sink& s, size_t first, const float* c, double to_fixed) {
#pragma unroll
  for (uint32_t f = 0; f < F; ++f) {
    const long long q = __double2ll_rn(static_cast<double>(c[f]) * to_fixed);
    atomicAdd(s.fixed + first + f, static_cast<unsigned long long>(q));  // two's complement wraps
  }
}

template <uint32_t F, bool Deterministic>
__device__ __forceinline__ void add(const Sink& s, uint32_t entry, const float* c, double to_fixed) {
  if constexpr (Deterministic)
    add_fixed<F>(s, size_t(entry) * F, c, to_fixed);
  else
    add_fast<F>(s, size_t(entry) * F, c);
}

// Record b's first-order contributions to level L: corner weight * dL/doutput to each corner, or
// all of it to one corner (Nearest; stochastic interpolation, the corner chosen as the CPU chooses
// it). A single contribution goes to add(entry, contribution[F]); the corners go in pairs, k and
// k + 1 (the two ends of the cell along axis 0, which add_fast_pair can add together), to
// add_pair(entry0, contribution0, entry1, contribution1).
template <uint32_t D, uint32_t F, typename Add, typename AddPair>
__device__ __forceinline__ void first_order_contributions(const Launch& g, const LevelInfo& L, uint32_t l,
                                                          const Cell<D>& c, const float* gv, int64_t b, int64_t batch,
                                                          Add&& add, AddPair&& add_pair) {
  uint32_t v[D];
  if (g.interpolation == GridInterpolation::Nearest) {
    add(entry_of<D>(g, L, c.vertex), gv);
    return;
  }
  if (g.stochastic) {
    const float sample = grid_stochastic_sample(static_cast<uint32_t>(b), l, static_cast<uint32_t>(batch));
#pragma unroll
    for (uint32_t d = 0; d < D; ++d) v[d] = sample >= c.w[d] ? c.vertex[d] : c.vertex[d] + 1;
    add(entry_of<D>(g, L, v), gv);
    return;
  }
  float c0[F], c1[F];
#pragma unroll
  for (uint32_t k = 0; k < (1u << D); k += 2) {
    const float w0 = grid_corner_weight<float, D>(c.w, k), w1 = grid_corner_weight<float, D>(c.w, k + 1);
#pragma unroll
    for (uint32_t f = 0; f < F; ++f) c0[f] = w0 * gv[f], c1[f] = w1 * gv[f];
    corner_vertex<D>(c, k, v);
    const uint32_t e0 = entry_of<D>(g, L, v);
    corner_vertex<D>(c, k + 1, v);
    add_pair(e0, c0, entry_of<D>(g, L, v), c1);
  }
}

// Thread i's (record, level) where the levels go in groups of `group` (contribution_group()):
// group by group, and within a group record by record, a record's levels of the group side by side.
// group = n_levels: record-major; 1: level-major.
__device__ __forceinline__ void grouped_record_and_level(int64_t i, int64_t batch, uint32_t n_levels, uint32_t group,
                                                         int64_t& record, uint32_t& level) {
  if (group >= n_levels) return record_and_level(i, n_levels, record, level);
  if (group == 1) return level_and_record(i, batch, record, level);
  const int64_t per_group = batch * group;
  const uint32_t g = static_cast<uint32_t>(i / per_group);
  record_and_level(i - int64_t(g) * per_group, min(group, n_levels - g * group), record, level);
  level += g * group;
}

// One thread per (record, level) for levels [first_level, n_levels), in the order
// contribution_group() chooses (record-major reads whole dL/doutput rows; groups of a few levels
// keep those levels' sums in L2 while they take their atomics).
// Launched beside shared_level_kernel (the levels before first_level), block 0 holds it back until
// that kernel has finished, so that what follows on the stream sees every level's sums.
// SecondOrder: directional weight * dL/doutput to each corner; WithFirst (fast sums only) adds the
// first-order term corner weight * dy_first to the same contribution, one atomic for both.
template <uint32_t D, uint32_t F, bool SecondOrder, bool WithFirst, bool Deterministic>
__global__ void contribution_kernel(Launch g, uint32_t first_level, int64_t batch, uint32_t group,
                                    const float* __restrict__ x, int64_t ldx, Matrix dy, const float* __restrict__ dir,
                                    int64_t ldv, Matrix dy_first, Sink sink) {
  static_assert(!WithFirst || (SecondOrder && !Deterministic), "the first-order term rides on the fast second order");
  if (blockIdx.x == 0) wait_for_prerequisite_kernel();
  const uint32_t n_levels = g.n_levels - first_level;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * n_levels) return;
  int64_t b;
  uint32_t l;
  grouped_record_and_level(i, batch, n_levels, group, b, l);
  l += first_level;
  const LevelInfo L = g.levels[l];
  const Cell<D> c = locate<D>(x, ldx, b, L.scale, g.interpolation);
  const double to_fixed = Deterministic ? sink.to_fixed[l] : 0.0;
  float gv[F];
#pragma unroll
  for (uint32_t f = 0; f < F; ++f) gv[f] = dy.load(b, l * F + f);

  if constexpr (SecondOrder) {  // never launched for Nearest (no input gradient to differentiate)
    float vd[D], g1[F], c0[F], c1[F];
    uint32_t v[D];
#pragma unroll
    for (uint32_t d = 0; d < D; ++d) vd[d] = dir[b * ldv + d];
    if constexpr (WithFirst) {
#pragma unroll
      for (uint32_t f = 0; f < F; ++f) g1[f] = dy_first.load(b, l * F + f);
    }
    // Corners in pairs along axis 0, as the first order takes them (add_fast_pair).
#pragma unroll
    for (uint32_t k = 0; k < (1u << D); k += 2) {
      const float s0 = grid_corner_directional_weight<float, D>(c.w, c.dw, L.scale, vd, k),
                  s1 = grid_corner_directional_weight<float, D>(c.w, c.dw, L.scale, vd, k + 1);
#pragma unroll
      for (uint32_t f = 0; f < F; ++f) c0[f] = s0 * gv[f], c1[f] = s1 * gv[f];
      if constexpr (WithFirst) {
        const float w0 = grid_corner_weight<float, D>(c.w, k), w1 = grid_corner_weight<float, D>(c.w, k + 1);
#pragma unroll
        for (uint32_t f = 0; f < F; ++f) c0[f] = fmaf(w0, g1[f], c0[f]), c1[f] = fmaf(w1, g1[f], c1[f]);
      }
      corner_vertex<D>(c, k, v);
      const uint32_t e0 = entry_of<D>(g, L, v);
      corner_vertex<D>(c, k + 1, v);
      const uint32_t e1 = entry_of<D>(g, L, v);
      if constexpr (Deterministic) {
        add<F, true>(sink, e0, c0, to_fixed);
        add<F, true>(sink, e1, c1, to_fixed);
      } else {
        add_fast_pair<F>(sink, e0, c0, e1, c1);
      }
    }
  } else {
    auto add_one = [&](uint32_t entry, const float* contrib) { add<F, Deterministic>(sink, entry, contrib, to_fixed); };
    first_order_contributions<D, F>(g, L, l, c, gv, b, batch, add_one,
                                    [&](uint32_t e0, const float* c0, uint32_t e1, const float* c1) {
                                      if constexpr (Deterministic) {
                                        add_one(e0, c0);
                                        add_one(e1, c1);
                                      } else {
                                        add_fast_pair<F>(sink, e0, c0, e1, c1);
                                      }
                                    });
  }
}

// Levels [0, gridDim.y) in the fast first order: tables so small that thousands of records land on
// each entry (W1's coarsest level: 17 x 17 entries for 2^18 records x 4 corners), where float
// atomics on one address queue in its L2 slice. A block sums its records' contributions to one
// level in shared memory, then adds each entry it touched to the sums once. The contribution
// kernel (the other levels) may start beside it.
//
// On CUDA the block sums are fixed point: shared-memory float atomics are a compare-and-swap loop
// per add on sm_90 (SASS ATOMS.CAST.SPIN), 32-bit integer ones a single ATOMS.ADD. The block's
// largest |dL/doutput| on the level, times its records, bounds any entry's sum (a record's corner
// weights sum to 1); a contribution becomes q = round(c * 2^s) with that bound at 2^46, and q's
// high part (q >> 16) and low 16 bits go into two 32-bit sums: neither can overflow while a block
// adds at most kMaxBlockContributions to one entry, and each sum is exact, rounded to 2^-s (about
// 2^-34 of the block's largest |dL/doutput|) where an FP32 sum rounds every add. A non-finite
// dL/doutput (no scale exists) sends the block through float atomics instead, passing it on.
#if defined(TINYFUSE_WITH_HIP)
constexpr bool kSharedFixedPoint = false;  // AMD's LDS float atomics are native (ds_add_f32)
#else
constexpr bool kSharedFixedPoint = true;
#endif
constexpr int64_t kMaxBlockContributions = int64_t(1) << 15;  // low sums < 2^15 * 2^16 = 2^31

struct FixedPair {  // one feature's block sum: sum of (q >> 16), sum of (q & 0xffff)
  int hi;
  unsigned lo;
};

template <uint32_t D, uint32_t F>
__global__ void shared_level_kernel(Launch g, int64_t batch, const float* __restrict__ x, int64_t ldx, Matrix dy,
                                    float* __restrict__ sums) {
  extern __shared__ float level_sums[];  // n floats, or n FixedPairs where `fixed`
  __shared__ unsigned block_max;         // float bits of the block's largest |dL/doutput|
  let_dependent_kernel_start();
  const uint32_t l = blockIdx.y;
  const LevelInfo L = g.levels[l];
  const uint32_t n = L.size * F;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  for (uint32_t i = threadIdx.x; i < (kSharedFixedPoint ? 2 : 1) * n; i += blockDim.x) level_sums[i] = 0.0f;  // ints: 0
  if (threadIdx.x == 0) block_max = 0;
  __syncthreads();
  bool fixed = false;
  float to_fixed = 0.0f;
  double from_fixed = 0.0;
  if constexpr (kSharedFixedPoint) {
    unsigned bits = 0;
    for (int64_t b = first; b < batch; b += stride)
#pragma unroll
      for (uint32_t f = 0; f < F; ++f) bits = max(bits, __float_as_uint(fabsf(dy.load(b, l * F + f))));
    atomicMax(&block_max, bits);
    __syncthreads();
    const float m = __uint_as_float(block_max);
    if (m == 0.0f) return;  // every contribution is zero (uniform across the block)
    const int64_t records = (batch + stride - 1) / stride * blockDim.x;
    if (m <= FLT_MAX && (records << D) <= kMaxBlockContributions) {
      int e = 0;
      frexp(static_cast<double>(m) * static_cast<double>(records), &e);  // bound < 2^e
      const int s = min(46 - e, 126);
      to_fixed = ldexpf(1.0f, s);  // exact: s stays within float's normal exponents (e > -126)
      from_fixed = ldexp(1.0, -s);
      fixed = true;
    }
  }
  auto* level_fixed = reinterpret_cast<FixedPair*>(level_sums);
  for (int64_t b = first; b < batch; b += stride) {
    const Cell<D> c = locate<D>(x, ldx, b, L.scale, g.interpolation);
    float gv[F];
#pragma unroll
    for (uint32_t f = 0; f < F; ++f) gv[f] = dy.load(b, l * F + f);
    auto add_one = [&](uint32_t entry, const float* contrib) {
      const uint32_t at = (entry - L.offset) * F;
#pragma unroll
      for (uint32_t f = 0; f < F; ++f) {
        if (fixed) {
          const long long q = __float2ll_rn(contrib[f] * to_fixed);
          atomicAdd(&level_fixed[at + f].hi, static_cast<int>(q >> 16));
          atomicAdd(&level_fixed[at + f].lo, static_cast<unsigned>(q & 0xffff));
        } else {
          atomicAdd(level_sums + at + f, contrib[f]);
        }
      }
    };
    first_order_contributions<D, F>(g, L, l, c, gv, b, batch, add_one,
                                    [&](uint32_t e0, const float* c0, uint32_t e1, const float* c1) {
                                      add_one(e0, c0);
                                      add_one(e1, c1);
                                    });
  }
  __syncthreads();
  float* level = sums + size_t(L.offset) * F;
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = fixed ? static_cast<float>(static_cast<double>(level_fixed[i].hi * (1ll << 16) + level_fixed[i].lo) *
                                               from_fixed)
                          : level_sums[i];
    if (v != 0.0f) atomicAdd(level + i, v);  // NaN != 0: a NaN is passed on
  }
}

// Per level, the largest max_f |dL/doutput| of a record (times sum_d |v_d| in the second order),
// as float bits (order-preserving for non-negative floats; NaN compares above +inf).
template <uint32_t D, uint32_t F, bool SecondOrder>
__global__ void bound_kernel(uint32_t n_levels, int64_t batch, Matrix dy, const float* __restrict__ dir, int64_t ldv,
                             unsigned* level_max) {
  extern __shared__ unsigned block_max[];
  for (uint32_t l = threadIdx.x; l < n_levels; l += blockDim.x) block_max[l] = 0;
  __syncthreads();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < batch * n_levels) {
    int64_t b;
    uint32_t l;
    record_and_level(i, n_levels, b, l);
    unsigned bits = 0;
#pragma unroll
    for (uint32_t f = 0; f < F; ++f) bits = max(bits, __float_as_uint(fabsf(dy.load(b, l * F + f))));
    if constexpr (SecondOrder) {
      float sum = 0.0f;
#pragma unroll
      for (uint32_t d = 0; d < D; ++d) sum += fabsf(dir[b * ldv + d]);
      bits = __float_as_uint(fabsf(__uint_as_float(bits) * sum));
    }
    atomicMax(&block_max[l], bits);
  }
  __syncthreads();
  for (uint32_t l = threadIdx.x; l < n_levels; l += blockDim.x)
    if (block_max[l] != 0) atomicMax(&level_max[l], block_max[l]);
}

// 2^s_l (and 2^-s_l) with bound_l * 2^s_l <= 2^62, bound_l = batch * level_max * (largest total
// corner weight of a record: 1 in the first order; 2 * scale * max dw in the second, max dw
// being 1 (Linear) or 1.5 (Smoothstep)). NaN marks a level with a non-finite gradient.
__global__ void fixed_scale_kernel(Launch g, int64_t batch, bool second_order, const unsigned* level_max,
                                   double* to_fixed, double* from_fixed) {
  const uint32_t l = blockIdx.x * blockDim.x + threadIdx.x;
  if (l >= g.n_levels) return;
  const float m = __uint_as_float(level_max[l]);
  if (!(m <= FLT_MAX)) {
    to_fixed[l] = 0.0;
    from_fixed[l] = __longlong_as_double(0x7ff8000000000000ll);  // NaN
    return;
  }
  double bound = static_cast<double>(m) * static_cast<double>(batch);
  if (second_order)
    bound *= 2.0 * g.levels[l].scale * (g.interpolation == GridInterpolation::Smoothstep ? 1.5 : 1.0);
  if (bound == 0.0) {
    to_fixed[l] = 0.0;
    from_fixed[l] = 0.0;
    return;
  }
  int e = 0;
  frexp(bound, &e);  // bound < 2^e
  const int s = min(62 - e, 1000);
  to_fixed[l] = ldexp(1.0, s);
  from_fixed[l] = ldexp(1.0, -s);
}

// gradients = [gradients +] fixed * 2^-s_l, level by level (blockIdx.y).
template <typename T>
__global__ void fixed_to_gradients_kernel(Launch g, uint32_t F, const unsigned long long* __restrict__ fixed,
                                          const double* __restrict__ from_fixed, T* grads, bool accumulate) {
  const uint32_t l = blockIdx.y;
  const LevelInfo L = g.levels[l];
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(L.size) * F) return;
  const size_t idx = size_t(L.offset) * F + i;
  const float v = static_cast<float>(static_cast<double>(static_cast<long long>(fixed[idx])) * from_fixed[l]);
  grads[idx] = from_float<T>(accumulate ? to_float(grads[idx]) + v : v);
}

// FP16 gradients = [gradients +] FP32 sums (fast mode with FP16 parameters), kHalfPack elements a
// thread; with Packed (the gradients start pack-aligned, as the sums do) by vector accesses.
constexpr int kHalfPack = 4;
__device__ __forceinline__ __half gradient_of_sum(float sum, __half old, bool accumulate) {
  return __float2half_rn(accumulate ? __half2float(old) + sum : sum);
}
template <bool Packed>
__global__ void f32_to_half_kernel(const float* __restrict__ sums, __half* grads, size_t n, bool accumulate) {
  const size_t i = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) * kHalfPack;
  if (i >= n) return;
  if (Packed && i + kHalfPack <= n) {
    const Pack<float, kHalfPack> s = load_pack<kHalfPack>(sums, int64_t(i));
    Pack<__half, kHalfPack> g{};
    if (accumulate) g = load_pack<kHalfPack>(grads, int64_t(i));
#pragma unroll
    for (int k = 0; k < kHalfPack; ++k) g.v[k] = gradient_of_sum(s.v[k], g.v[k], accumulate);
    store_pack(grads, int64_t(i), g);
    return;
  }
  for (size_t k = i; k < i + kHalfPack && k < n; ++k) grads[k] = gradient_of_sum(sums[k], grads[k], accumulate);
}

// How many leading levels the fast first order sums in shared memory: each level's table fits
// kSharedLevelBytes of FP32 sums (no opt-in to larger shared memory needed) and receives at least
// kSharedLevelLoad contributions per entry on average (below that the direct atomics rarely meet
// on one address and the block sums would cost more than they save).
constexpr size_t kSharedLevelBytes = 48 * 1024;
constexpr int64_t kSharedLevelLoad = 64;

uint32_t shared_levels(const Job& job, const GradientRequest& r) {
  if (r.deterministic || r.v != nullptr) return 0;
  const int64_t contributions = job.batch * (job.g.stochastic || job.g.interpolation == GridInterpolation::Nearest
                                                 ? 1
                                                 : int64_t(1) << job.dims);
  uint32_t n = 0;
  while (n < job.g.n_levels) {
    const uint32_t entries = r.level_entries[n];
    if (size_t(entries) * job.features * sizeof(float) > kSharedLevelBytes ||
        contributions < kSharedLevelLoad * int64_t(entries))
      break;
    ++n;
  }
  return n;
}

// The order the contribution kernel takes (record, level) pairs in, as levels per group
// (grouped_record_and_level). Record-major (all levels in one group), a record's levels side by
// side, coalesces its x and dL/doutput loads and suits sums that stay in L2 together (W1's 4 MB).
// Once the sums take more than a quarter of L2 their atomics thrash it (W3's and W4's 16 levels x
// 2^19 entries x 2 features: 50 MB of FP32 sums against the H100's 50 MB), so the blocks in flight
// must add into a few levels' sums at a time: groups of kLevelsPerGroupPastL2. Swept on an H200
// (W3 and W4 training, 2^18 and 2^20, group sizes 1, 2, 3, 4, 8 and 16 alternated twice): four
// levels a group beat level-major by 6 % on W3's step at 2^20 (439 against 414 M samples/s; its
// contribution kernel 988 against 1,110 µs, 0.46 against 1.48 GB of DRAM, the record's four levels
// reading one 16-byte piece of its dL/doutput row instead of four) and 1 % at 2^18; 3 ties, 8 is
// within 1 %, 16 (record-major) loses 7-16 %. Developer builds take the group size from
// TINYFUSE_GRID_CONTRIBUTION_GROUP (1 .. 64, read once; clamped to the levels).
constexpr uint32_t kLevelsPerGroupPastL2 = 4;

uint32_t contribution_group(const GradientRequest& r, uint32_t n_levels) {
#if defined(TINYFUSE_DEVELOPER_KNOBS)
  static const long knob = developer_knob("TINYFUSE_GRID_CONTRIBUTION_GROUP", 1, 64, 0);
  if (knob > 0) return std::min<uint32_t>(static_cast<uint32_t>(knob), n_levels);
#endif
  int device = 0, l2_bytes = 0;
  TF_GPU_CHECK(gpuGetDevice(&device));
  TF_GPU_CHECK(gpuDeviceGetAttribute(&l2_bytes, gpuDevAttrL2CacheSize, device));
  const size_t sum_bytes = r.n_params * (r.deterministic ? sizeof(unsigned long long) : sizeof(float));
  return sum_bytes > static_cast<size_t>(l2_bytes) / 4 ? std::min(kLevelsPerGroupPastL2, n_levels) : n_levels;
}

// `beside_shared`: shared_level_kernel was launched just before, for the levels before
// first_level; the two then overlap where the device allows (their sums are disjoint).
template <bool Deterministic>
void launch_contributions(const Job& job, const GradientRequest& r, const Sink& sink, uint32_t first_level,
                          bool beside_shared = false) {
  const int64_t threads = job.batch * (job.g.n_levels - first_level);
  const bool second = r.v != nullptr, with_first = r.dL_doutput_first.data != nullptr;
  if (threads == 0) return;
  const uint32_t group = contribution_group(r, job.g.n_levels - first_level);
  dispatch_dims_features(job.dims, job.features, [&](auto d, auto f) {
    constexpr uint32_t D = decltype(d)::value, F = decltype(f)::value;
    const auto blocks = blocks_for_threads(threads);
    auto* kernel = !second ? contribution_kernel<D, F, false, false, Deterministic>
                   : with_first ? contribution_kernel<D, F, true, !Deterministic, Deterministic>
                                : contribution_kernel<D, F, true, false, Deterministic>;
    launch_beside_previous(beside_shared, blocks, kThreadsPerBlock, 0, job.stream, kernel, job.g, first_level, job.batch,
                           group, r.x, r.ldx, r.dL_doutput, r.v, r.ldv, r.dL_doutput_first, sink);
  });
  TF_GPU_CHECK_LAUNCH("grid contribution_kernel");
}

// Levels [0, n_shared) through shared_level_kernel: about two blocks per multiprocessor in all, and
// enough per level that no block adds more than kMaxBlockContributions to one entry (its fixed-point
// sums' limit).
void launch_shared_levels(const Job& job, const GradientRequest& r, float* sums, uint32_t n_shared) {
  int device = 0, sms = 0;
  TF_GPU_CHECK(gpuGetDevice(&device));
  TF_GPU_CHECK(gpuDeviceGetAttribute(&sms, gpuDevAttrMultiProcessorCount, device));
  int64_t per_level = std::max<int64_t>(1, (2 * int64_t(sms) + n_shared - 1) / n_shared);
  const int64_t records_per_thread = (kMaxBlockContributions >> job.dims) / kThreadsPerBlock;
  if (kSharedFixedPoint && records_per_thread > 0)
    per_level = std::max(per_level, (job.batch + records_per_thread * kThreadsPerBlock - 1) /
                                        (records_per_thread * kThreadsPerBlock));
  const dim3 blocks(static_cast<unsigned>(std::min<int64_t>(per_level, blocks_for_threads(job.batch))), n_shared);
  const size_t smem = size_t(*std::max_element(r.level_entries, r.level_entries + n_shared)) * job.features *
                      (kSharedFixedPoint ? sizeof(FixedPair) : sizeof(float));
  dispatch_dims_features(job.dims, job.features, [&](auto d, auto f) {
    constexpr uint32_t D = decltype(d)::value, F = decltype(f)::value;
    if (smem > 48 * 1024)  // above the default limit (fixed-point sums take twice the float ones)
      TF_GPU_CHECK(gpuFuncSetAttribute(reinterpret_cast<const void*>(&shared_level_kernel<D, F>),
                                       gpuFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    shared_level_kernel<D, F><<<blocks, kThreadsPerBlock, smem, job.stream>>>(job.g, job.batch, r.x, r.ldx,
                                                                               r.dL_doutput, sums);
  });
  TF_GPU_CHECK_LAUNCH("grid shared_level_kernel");
}

void launch_bounds(const Job& job, const GradientRequest& r, unsigned* level_max) {
  const int64_t threads = job.batch * job.g.n_levels;
  const size_t smem = job.g.n_levels * sizeof(unsigned);
  dispatch_dims_features(job.dims, job.features, [&](auto d, auto f) {
    constexpr uint32_t D = decltype(d)::value, F = decltype(f)::value;
    const auto blocks = blocks_for_threads(threads);
    if (r.v)
      bound_kernel<D, F, true><<<blocks, kThreadsPerBlock, smem, job.stream>>>(job.g.n_levels, job.batch, r.dL_doutput,
                                                                              r.v, r.ldv, level_max);
    else
      bound_kernel<D, F, false><<<blocks, kThreadsPerBlock, smem, job.stream>>>(job.g.n_levels, job.batch,
                                                                               r.dL_doutput, r.v, r.ldv, level_max);
  });
  TF_GPU_CHECK_LAUNCH("grid bound_kernel");
}

void deterministic_gradients(const Job& job, const GradientRequest& r) {
  const uint32_t n_levels = job.g.n_levels;
  // One scratch allocation: fixed-point sums, then per level the max bits and the two scales.
  const size_t fixed_bytes = r.n_params * sizeof(unsigned long long);
  const size_t scale_bytes = n_levels * sizeof(double);
  const size_t max_offset = fixed_bytes + 2 * scale_bytes;
  Buffer scratch = Buffer::on_stream(Device::CUDA, max_offset + n_levels * sizeof(unsigned), job.stream);
  char* base = static_cast<char*>(scratch.data());
  auto* fixed = reinterpret_cast<unsigned long long*>(base);
  auto* to_fixed = reinterpret_cast<double*>(base + fixed_bytes);
  auto* from_fixed = to_fixed + n_levels;
  auto* level_max = reinterpret_cast<unsigned*>(base + max_offset);
  TF_GPU_CHECK(gpuMemsetAsync(fixed, 0, fixed_bytes, job.stream));
  TF_GPU_CHECK(gpuMemsetAsync(level_max, 0, n_levels * sizeof(unsigned), job.stream));

  launch_bounds(job, r, level_max);
  fixed_scale_kernel<<<blocks_for_threads(n_levels), kThreadsPerBlock, 0, job.stream>>>(job.g, job.batch, r.v != nullptr,
                                                                                       level_max, to_fixed, from_fixed);
  TF_GPU_CHECK_LAUNCH("grid fixed_scale_kernel");
  launch_contributions<true>(job, r, Sink{nullptr, false, fixed, to_fixed}, 0);

  const uint32_t max_entries = *std::max_element(r.level_entries, r.level_entries + n_levels);
  const dim3 blocks(static_cast<unsigned>(blocks_for_threads(int64_t(max_entries) * job.features)), n_levels);
  if (r.dtype == DType::F16)
    fixed_to_gradients_kernel<__half><<<blocks, kThreadsPerBlock, 0, job.stream>>>(
        job.g, job.features, fixed, from_fixed, static_cast<__half*>(r.gradients), r.accumulate);
  else
    fixed_to_gradients_kernel<float><<<blocks, kThreadsPerBlock, 0, job.stream>>>(
        job.g, job.features, fixed, from_fixed, static_cast<float*>(r.gradients), r.accumulate);
  TF_GPU_CHECK_LAUNCH("grid fixed_to_gradients_kernel");
}

void fast_gradients(const Job& job, const GradientRequest& r) {
  const uint32_t n_shared = shared_levels(job, r);
  auto contributions = [&](float* sums, bool vec) {
    if (n_shared > 0) launch_shared_levels(job, r, sums, n_shared);
    launch_contributions<false>(job, r, Sink{sums, vec, nullptr, nullptr}, n_shared, n_shared > 0);
  };
  if (r.dtype == DType::F32) {
    if (!r.accumulate) TF_GPU_CHECK(gpuMemsetAsync(r.gradients, 0, r.n_params * sizeof(float), job.stream));
    float* g = static_cast<float*>(r.gradients);
    contributions(g, reinterpret_cast<uintptr_t>(g) % 16 == 0);
    return;
  }
  Buffer sums = Buffer::on_stream(Device::CUDA, r.n_params * sizeof(float), job.stream);
  float* s = static_cast<float*>(sums.data());
  TF_GPU_CHECK(gpuMemsetAsync(s, 0, r.n_params * sizeof(float), job.stream));
  contributions(s, true);
  auto* grads = static_cast<__half*>(r.gradients);
  const auto blocks = blocks_for_threads((int64_t(r.n_params) + kHalfPack - 1) / kHalfPack);
  if (pack_aligned<kHalfPack>(grads))
    f32_to_half_kernel<true><<<blocks, kThreadsPerBlock, 0, job.stream>>>(s, grads, r.n_params, r.accumulate);
  else
    f32_to_half_kernel<false><<<blocks, kThreadsPerBlock, 0, job.stream>>>(s, grads, r.n_params, r.accumulate);
  TF_GPU_CHECK_LAUNCH("grid f32_to_half_kernel");
}

}  // namespace

void param_gradients(const Job& job, const GradientRequest& r) {
  if (r.n_params == 0) return;
  if (r.dL_doutput_first.data && (!r.v || !first_order_rides_on_second(job.g, r.deterministic)))
    throw Error("internal: a first-order term on a grid gradient request that cannot carry it");
  if (job.batch == 0 || (r.v && job.g.interpolation == GridInterpolation::Nearest)) {
    // Nothing to add: Overwrite leaves zeros (0 bits are 0 in FP32 and FP16).
    if (!r.accumulate) TF_GPU_CHECK(gpuMemsetAsync(r.gradients, 0, r.n_params * dtype_size(r.dtype), job.stream));
    return;
  }
  if (r.deterministic)
    deterministic_gradients(job, r);
  else
    fast_gradients(job, r);
}

}  // namespace tinyfuse::cuda::grid
