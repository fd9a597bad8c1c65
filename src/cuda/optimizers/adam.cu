// Adam on the GPU: the per-element update, one elementwise kernel per step, all in float, with
// the CPU reference's arithmetic (cpu/optimizers/adam.cpp); core/optimizers/adam.h has the host
// half (the per-step constants, computed on the host as for the CPU) and the semantics. This file
// is compiled without FMA contraction so each operation rounds as on the CPU.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/optimizers/adam.h"
#include "cuda/common.cuh"
#include "cuda/optimizers/gpu_optimizer.h"
#include "cuda/optimizers/step_types.cuh"
#include "tinyfuse/buffer.h"

namespace tinyfuse::cuda {

namespace {

__device__ __forceinline__ float bias_correction(const AdamConsts& c, uint32_t t) {
  const float tf = static_cast<float>(t);
  return sqrtf(1.0f - powf(c.beta2, tf)) / (1.0f - powf(c.beta1, tf));
}

// One element's state as the update reads and writes it.
struct AdamElement {
  float w, m, v;
  uint32_t t;
};

// The update of one element whose values are loaded; false where the element is skipped (its
// state and weight stay as they were).
__device__ __forceinline__ bool adam_update(const AdamConsts& c, bool matrix, float g, AdamElement& e) {
  if (matrix ? !c.do_matrix : !c.do_other) return false;
  g /= c.loss_scale;
  if (!matrix && g == 0.0f && c.skip_zero_grad) return false;  // untouched non-matrix params keep their state
  g += (matrix ? c.l2_reg : c.non_matrix_l2_reg) * e.w;
  if (c.gradient_clipping != 0.0f) g = copysignf(fminf(fabsf(g), c.gradient_clipping), g);
  e.m = c.beta1 * e.m + c.one_minus_beta1 * g;
  e.v = c.beta2 * e.v + c.one_minus_beta2 * (g * g);
  e.t += 1;
  float lr = matrix ? c.lr : c.lr * c.non_matrix_factor;
  lr *= e.t == c.step ? c.correction_at_step : bias_correction(c, e.t);
  const float rate = fminf(fmaxf(lr / (sqrtf(e.v) + c.epsilon), c.lower), c.upper);
  const float decayed = (1.0f - c.relative_decay * lr) * e.w - copysignf(c.absolute_decay * lr, e.w);
  float new_w = decayed - rate * e.m;
  if (c.clipping != 0.0f) new_w = fminf(fmaxf(new_w, -c.clipping), c.clipping);
  e.w = new_w;
  return true;
}

// Everything a step reads and writes, per element.
template <typename P, typename G>
struct AdamArrays {
  const uint8_t* __restrict__ matrix_mask;
  float* __restrict__ master;
  P* __restrict__ params;  // null where the master weights are the params
  const G* __restrict__ gradients;
  float* __restrict__ first;
  float* __restrict__ second;
  uint32_t* __restrict__ param_steps;

  __device__ __forceinline__ void store(int64_t i, const AdamElement& e) const {
    first[i] = e.m;
    second[i] = e.v;
    param_steps[i] = e.t;
    store_weight(master, params, i, e.w);
  }
};

template <typename P, typename G>
__global__ void adam_kernel(AdamConsts c, int64_t begin, int64_t n, AdamArrays<P, G> a) {
  const int64_t i = begin + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  AdamElement e{a.master[i], a.first[i], a.second[i], a.param_steps[i]};
  if (adam_update(c, a.matrix_mask[i] != 0, to_float(a.gradients[i]), e)) a.store(i, e);
}

constexpr int kPack = 4;  // elements a thread of the packed kernel updates (16 bytes of floats)

// The elements [0, packs * kPack) with vector loads and stores (the step is bound by memory; see
// Pack). The arithmetic is adam_update's, element by element.
template <typename P, typename G>
__global__ void adam_packed_kernel(AdamConsts c, int64_t packs, AdamArrays<P, G> a) {
  const int64_t q = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (q >= packs) return;
  const int64_t i = q * kPack;
  const Pack<uint8_t, kPack> mask = load_pack<kPack>(a.matrix_mask, i);
  const Pack<G, kPack> g = load_pack<kPack>(a.gradients, i);
  Pack<float, kPack> w = load_pack<kPack>(a.master, i), m = load_pack<kPack>(a.first, i);
  Pack<float, kPack> v = load_pack<kPack>(a.second, i);
  Pack<uint32_t, kPack> t = load_pack<kPack>(a.param_steps, i);
  bool updated[kPack], all = true;
#pragma unroll
  for (int k = 0; k < kPack; ++k) {
    AdamElement e{w.v[k], m.v[k], v.v[k], t.v[k]};
    updated[k] = adam_update(c, mask.v[k] != 0, to_float(g.v[k]), e);
    all &= updated[k];
    w.v[k] = e.w;
    m.v[k] = e.m;
    v.v[k] = e.v;
    t.v[k] = e.t;
  }
  if (all) {
    store_pack(a.master, i, w);
    store_pack(a.first, i, m);
    store_pack(a.second, i, v);
    store_pack(a.param_steps, i, t);
    if (a.params) {
      Pack<P, kPack> p;
#pragma unroll
      for (int k = 0; k < kPack; ++k) p.v[k] = from_float<P>(w.v[k]);
      store_pack(a.params, i, p);
    }
    return;
  }
  // Skipped elements are not written (their params may differ from the rounded master weights).
#pragma unroll
  for (int k = 0; k < kPack; ++k)
    if (updated[k]) a.store(i + k, AdamElement{w.v[k], m.v[k], v.v[k], t.v[k]});
}

// The packed kernel where every array starts at a pack boundary (a slice of a Composite optimizer
// may not), the per-element kernel for the rest.
template <typename P, typename G>
void launch_adam(const AdamConsts& c, int64_t n, const AdamArrays<P, G>& a, gpuStream_t stream) {
  const bool packed = pack_aligned<kPack>(a.matrix_mask) && pack_aligned<kPack>(a.master) &&
                      (!a.params || pack_aligned<kPack>(a.params)) && pack_aligned<kPack>(a.gradients) &&
                      pack_aligned<kPack>(a.first) && pack_aligned<kPack>(a.second) && pack_aligned<kPack>(a.param_steps);
  const int64_t packs = packed ? n / kPack : 0;
  if (packs > 0) {
    adam_packed_kernel<<<blocks_for(packs), kThreadsPerBlock, 0, stream>>>(c, packs, a);
    TF_GPU_CHECK_LAUNCH("adam_packed_kernel");
  }
  const int64_t begin = packs * kPack;
  if (begin < n) {
    adam_kernel<<<blocks_for(n - begin), kThreadsPerBlock, 0, stream>>>(c, begin, n, a);
    TF_GPU_CHECK_LAUNCH("adam_kernel");
  }
}

class Adam final : public AdamOptimizer<GpuOptimizer> {
 public:
  using AdamOptimizer<GpuOptimizer>::AdamOptimizer;

  // The moments and step counters (AdamOptimizer's plan), then which elements are matrix parameters.
  void plan_memory(MemoryPlan& plan, size_t n) const override {
    AdamOptimizer<GpuOptimizer>::plan_memory(plan, n);
    plan.add(who() + " matrix mask", n, 1, false);
    plan.add(who() + " matrix mask (host staging)", n, 1, true);
  }

 private:
  void allocate_state(size_t n, const std::vector<ParamRun>& runs) override {
    std::vector<uint8_t> mask(n, 0);
    for (const ParamRun& r : runs)
      if (r.matrix) std::fill(mask.begin() + r.begin, mask.begin() + r.end, uint8_t(1));
    first_ = Buffer(Device::CUDA, n * sizeof(float));
    second_ = Buffer(Device::CUDA, n * sizeof(float));
    param_steps_ = Buffer(Device::CUDA, n * sizeof(uint32_t));
    matrix_mask_ = Buffer(Device::CUDA, n);
    zero(first_.data(), n * sizeof(float));
    zero(second_.data(), n * sizeof(float));
    zero(param_steps_.data(), n * sizeof(uint32_t));
    upload(matrix_mask_.data(), mask.data(), n);
  }

  void update_elements(const StepArgs& args, const AdamConsts& c) override {
    launch_step(args, [&](int64_t n, auto* p, const auto* g) {
      using P = std::remove_pointer_t<decltype(p)>;
      using G = std::remove_const_t<std::remove_pointer_t<decltype(g)>>;
      launch_adam(c, n,
                  AdamArrays<P, G>{static_cast<const uint8_t*>(matrix_mask_.data()), args.master, p, g,
                                   static_cast<float*>(first_.data()), static_cast<float*>(second_.data()),
                                   static_cast<uint32_t*>(param_steps_.data())},
                  stream_of(args.stream));
    });
  }

  void read_moments(float* first, float* second, uint32_t* steps) const override {
    const size_t n = n_params();
    download(first, first_.data(), n * sizeof(float));
    download(second, second_.data(), n * sizeof(float));
    download(steps, param_steps_.data(), n * sizeof(uint32_t));
  }

  void write_moments(const float* first, const float* second, const uint32_t* steps) override {
    const size_t n = n_params();
    upload(first_.data(), first, n * sizeof(float));
    upload(second_.data(), second, n * sizeof(float));
    upload(param_steps_.data(), steps, n * sizeof(uint32_t));
  }

  Buffer first_, second_, param_steps_, matrix_mask_;
};

}  // namespace

std::unique_ptr<GpuOptimizer> make_adam(const OptimizerSpec& spec) { return std::make_unique<Adam>(spec); }

}  // namespace tinyfuse::cuda
