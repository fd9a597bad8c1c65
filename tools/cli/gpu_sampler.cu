#include "gpu_sampler.h"

#include "cuda/common.cuh"

namespace tinyfuse::cli {

namespace {

constexpr uint64_t kPcgMult = 6364136223846793005ULL;

// PCG32 as tinyfuse::Pcg32 (random.h): one step, the XSH-RR output, and a jump of `delta` steps
// (the composition of delta affine steps, by repeated squaring).
__host__ __device__ inline uint32_t pcg_next(uint64_t& state, uint64_t inc) {
  const uint64_t old = state;
  state = old * kPcgMult + inc;
  const uint32_t xorshifted = static_cast<uint32_t>(((old >> 18u) ^ old) >> 27u);
  const uint32_t rot = static_cast<uint32_t>(old >> 59u);
  return (xorshifted >> rot) | (xorshifted << ((~rot + 1u) & 31));
}

__host__ __device__ inline uint64_t pcg_advance(uint64_t state, uint64_t inc, uint64_t delta) {
  uint64_t step_mult = kPcgMult, step_inc = inc, total_mult = 1, total_inc = 0;
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

__device__ inline float pcg_float(uint64_t& state, uint64_t inc) {
  return __uint_as_float((pcg_next(state, inc) >> 9) | 0x3f800000u) - 1.0f;
}

// Sample i takes draws 2i (x) and 2i + 1 (y) after `base`; its colour is sample_bilinear's
// (image.cpp): pixel centres at +0.5, clamped at the borders. Every operation rounds on its own
// (no FMA contraction), as the host code does, so both give the same colours.
template <typename P>
__global__ void sample_kernel(uint64_t base, uint64_t inc, int64_t batch, const float* __restrict__ rgb, int width,
                              int height, P* __restrict__ positions, float* __restrict__ colours) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch) return;
  uint64_t s = pcg_advance(base, inc, 2 * static_cast<uint64_t>(i));
  const float px = pcg_float(s, inc), py = pcg_float(s, inc);
  positions[2 * i] = cuda::from_float<P>(px);
  positions[2 * i + 1] = cuda::from_float<P>(py);
  const float u = fminf(fmaxf(__fsub_rn(__fmul_rn(px, static_cast<float>(width)), 0.5f), 0.0f), static_cast<float>(width - 1));
  const float v = fminf(fmaxf(__fsub_rn(__fmul_rn(py, static_cast<float>(height)), 0.5f), 0.0f), static_cast<float>(height - 1));
  const int x0 = min(static_cast<int>(u), width - 1), y0 = min(static_cast<int>(v), height - 1);
  const int x1 = min(x0 + 1, width - 1), y1 = min(y0 + 1, height - 1);
  const float fx = u - x0, fy = v - y0;
  const float *p00 = rgb + (static_cast<int64_t>(y0) * width + x0) * 3, *p10 = rgb + (static_cast<int64_t>(y0) * width + x1) * 3;
  const float *p01 = rgb + (static_cast<int64_t>(y1) * width + x0) * 3, *p11 = rgb + (static_cast<int64_t>(y1) * width + x1) * 3;
  for (int c = 0; c < 3; ++c) {
    const float top = __fadd_rn(p00[c], __fmul_rn(__fsub_rn(p10[c], p00[c]), fx));
    const float bottom = __fadd_rn(p01[c], __fmul_rn(__fsub_rn(p11[c], p01[c]), fx));
    colours[3 * i + c] = __fadd_rn(top, __fmul_rn(__fsub_rn(bottom, top), fy));
  }
}

}  // namespace

struct GpuImageSampler::State {
  int width = 0, height = 0;
  int64_t batch = 0;
  DType position_dtype = DType::F32;
  uint64_t state = 0, inc = 0;  // the generator before the next batch
  Buffer image, positions, colours;
};

GpuImageSampler::GpuImageSampler(const jobs::Image& image, int64_t batch, DType position_dtype, uint64_t seed, uint64_t stream)
    : state_(std::make_unique<State>()) {
  if (position_dtype != DType::F32 && position_dtype != DType::F16)
    throw UnsupportedError("learn-image on cuda feeds f32 or f16 positions, the model reads " + to_string(position_dtype));
  State& s = *state_;
  s.width = image.width;
  s.height = image.height;
  s.batch = batch;
  s.position_dtype = position_dtype;
  // Pcg32::seed_with: state 0, one step, add the seed, one step.
  s.inc = (stream << 1u) | 1u;
  pcg_next(s.state, s.inc);
  s.state += seed;
  pcg_next(s.state, s.inc);
  s.image = Buffer(Device::CUDA, image.rgb.size() * sizeof(float));
  copy_tensor(s.image.matrix(DType::F32, 1, static_cast<int64_t>(image.rgb.size())),
              TensorView::matrix(const_cast<float*>(image.rgb.data()), 1, static_cast<int64_t>(image.rgb.size())));
  s.positions = Buffer(Device::CUDA, static_cast<size_t>(batch) * 2 * dtype_size(position_dtype));
  s.colours = Buffer(Device::CUDA, static_cast<size_t>(batch) * 3 * sizeof(float));
}

GpuImageSampler::~GpuImageSampler() = default;

void GpuImageSampler::next(TensorView& positions, TensorView& colours) {
  State& s = *state_;
  const gpuStream_t stream = cuda::stream_of(Stream{nullptr});
  const unsigned blocks = cuda::blocks_for(s.batch);
  const auto* rgb = static_cast<const float*>(s.image.data());
  auto* out = static_cast<float*>(s.colours.data());
  if (s.position_dtype == DType::F16)
    sample_kernel<__half><<<blocks, cuda::kThreadsPerBlock, 0, stream>>>(
        s.state, s.inc, s.batch, rgb, s.width, s.height, static_cast<__half*>(s.positions.data()), out);
  else
    sample_kernel<float><<<blocks, cuda::kThreadsPerBlock, 0, stream>>>(
        s.state, s.inc, s.batch, rgb, s.width, s.height, static_cast<float*>(s.positions.data()), out);
  TF_GPU_CHECK_LAUNCH("learn-image sampling");
  s.state = pcg_advance(s.state, s.inc, 2 * static_cast<uint64_t>(s.batch));
  positions = s.positions.matrix(s.position_dtype, s.batch, 2);
  colours = s.colours.matrix(DType::F32, s.batch, 3);
}

}  // namespace tinyfuse::cli
