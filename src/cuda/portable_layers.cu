// The portable FP32 layer launchers (portable_layers.h): tile shapes, activation dispatch and the
// deterministic split of weight-gradient sums over the batch.
#include "cuda/portable_layers.h"

#include <algorithm>
#include <type_traits>

#include "cuda/portable_gemm.cuh"

namespace tinyfuse::cuda {

namespace {

using pgemm::Epilogue;

// Row-major (batch x features) operands: 128 batch rows x 64 features per block, 8x4 per thread.
constexpr int kRowBM = 128, kRowBN = 64, kRowBK = 16, kRowTM = 8, kRowTN = 4;
// Weight gradients: a 64 x 64 tile of dW per block, 4x4 per thread, the batch split in chunks.
constexpr int kGradBM = 64, kGradBN = 64, kGradBK = 16, kGradTM = 4, kGradTN = 4;

// Weight-gradient chunking, a function of the shapes only (never of the device), so results are
// reproducible everywhere: about kGradTargetBlocks blocks, chunks of at least kGradMinChunk rows,
// partial sums of at most kGradMaxPartial floats.
constexpr int64_t kGradTargetBlocks = 512;
constexpr int64_t kGradMinChunk = 128;
constexpr int64_t kGradMaxPartial = int64_t(1) << 25;  // 128 MiB

// Calls f(std::integral_constant<Activation, a>) for a runtime activation a.
template <typename F>
void with_activation(Activation a, F&& f) {
  using A = Activation;
  switch (a) {
    case A::None: f(std::integral_constant<A, A::None>{}); return;
    case A::ReLU: f(std::integral_constant<A, A::ReLU>{}); return;
    case A::LeakyReLU: f(std::integral_constant<A, A::LeakyReLU>{}); return;
    case A::SiLU: f(std::integral_constant<A, A::SiLU>{}); return;
    case A::Exponential: f(std::integral_constant<A, A::Exponential>{}); return;
    case A::Sine: f(std::integral_constant<A, A::Sine>{}); return;
    case A::Sigmoid: f(std::integral_constant<A, A::Sigmoid>{}); return;
    case A::Squareplus: f(std::integral_constant<A, A::Squareplus>{}); return;
    case A::Softplus: f(std::integral_constant<A, A::Softplus>{}); return;
    case A::Tanh: f(std::integral_constant<A, A::Tanh>{}); return;
  }
  throw Error("internal: unknown activation");
}

dim3 row_grid(int64_t rows, int64_t cols) {
  return dim3(static_cast<unsigned>((rows + kRowBM - 1) / kRowBM), static_cast<unsigned>((cols + kRowBN - 1) / kRowBN), 1);
}

}  // namespace

void launch_forward(Activation act, const float* x, int64_t ldx, const float* w, const float* bias, int64_t rows,
                    uint32_t in, uint32_t out_w, float* z, float* y, float* out, int64_t ldo, gpuStream_t stream) {
  if (rows == 0 || (!z && !y && !out)) return;
  pgemm::Params p;
  p.A = x;
  p.lda = ldx;
  p.B = w;
  p.ldb = in;
  p.M = rows;
  p.N = out_w;
  p.K = in;
  p.k_chunk = in;
  p.bias = bias;
  p.Z = z;
  p.ldz = out_w;
  p.Y = y;
  p.ldy = out_w;
  p.out = out;
  p.ldo = ldo;
  with_activation(act, [&](auto a) {
    pgemm::gemm_kernel<kRowBM, kRowBN, kRowBK, kRowTM, kRowTN, true, true, true, Epilogue::Forward, decltype(a)::value>
        <<<row_grid(rows, out_w), pgemm::kThreads, 0, stream>>>(p);
    TF_GPU_CHECK_LAUNCH("PortableMLP forward GEMM");
  });
}

void launch_input_grad(Activation act, const float* dz, int64_t lddz, const float* w, int64_t rows, uint32_t in,
                       uint32_t out_w, const float* zprev, float* c, int64_t ldc, gpuStream_t stream) {
  if (rows == 0) return;
  pgemm::Params p;
  p.A = dz;
  p.lda = lddz;
  p.B = w;
  p.ldb = in;
  p.M = rows;
  p.N = in;
  p.K = out_w;
  p.k_chunk = out_w;
  p.zprev = zprev;
  p.ldzp = in;
  p.C = c;
  p.ldc = ldc;
  with_activation(act, [&](auto a) {
    pgemm::gemm_kernel<kRowBM, kRowBN, kRowBK, kRowTM, kRowTN, true, false, true, Epilogue::InputGrad, decltype(a)::value>
        <<<row_grid(rows, in), pgemm::kThreads, 0, stream>>>(p);
    TF_GPU_CHECK_LAUNCH("PortableMLP input-gradient GEMM");
  });
}

GradSplit grad_split(int64_t batch, uint32_t in, uint32_t out_w, bool biases) {
  GradSplit s;
  s.count = static_cast<int64_t>(out_w) * in + (biases ? out_w : 0);
  const int64_t tiles = ((out_w + kGradBM - 1) / kGradBM) * ((in + kGradBN - 1) / kGradBN);
  int64_t n = (kGradTargetBlocks + tiles - 1) / tiles;
  n = std::min(n, (batch + kGradMinChunk - 1) / kGradMinChunk);
  n = std::min(n, kGradMaxPartial / s.count);
  n = std::max<int64_t>(n, 1);
  s.chunk_rows = next_multiple<int64_t>((batch + n - 1) / n, kGradBK);
  s.n_chunks = static_cast<int>((batch + s.chunk_rows - 1) / s.chunk_rows);
  return s;
}

void launch_weight_grad(const GradSplit& split, const float* dz, int64_t lddz, const float* x, int64_t ldx, int64_t rows,
                        uint32_t in, uint32_t out_w, bool biases, float* grad, bool accumulate, float* partial,
                        gpuStream_t stream) {
  const int64_t n_weights = static_cast<int64_t>(out_w) * in;
  const bool direct = split.n_chunks == 1;
  float* dst = direct ? grad : partial;
  pgemm::Params p;
  p.A = dz;
  p.lda = lddz;
  p.B = x;
  p.ldb = ldx;
  p.M = out_w;
  p.N = in;
  p.K = rows;
  p.k_chunk = split.chunk_rows;
  p.C = dst;
  p.ldc = in;
  p.Cb = biases ? dst + n_weights : nullptr;
  p.chunk_stride = direct ? 0 : split.count;
  p.accumulate = direct && accumulate;
  const dim3 grid(static_cast<unsigned>((out_w + kGradBM - 1) / kGradBM), static_cast<unsigned>((in + kGradBN - 1) / kGradBN),
                  static_cast<unsigned>(split.n_chunks));
  pgemm::gemm_kernel<kGradBM, kGradBN, kGradBK, kGradTM, kGradTN, false, false, false, Epilogue::WeightGrad, Activation::None>
      <<<grid, pgemm::kThreads, 0, stream>>>(p);
  TF_GPU_CHECK_LAUNCH("PortableMLP weight-gradient GEMM");
  if (direct) return;
  pgemm::reduce_chunks_kernel<<<static_cast<unsigned>((split.count + 31) / 32), dim3(32, 8), 0, stream>>>(
      partial, split.count, split.n_chunks, grad, accumulate);
  TF_GPU_CHECK_LAUNCH("PortableMLP gradient chunk sum");
}

void launch_output_delta(Activation act, const float* dy, int64_t ldy, const float* z, float* dz, int64_t rows,
                         uint32_t width, gpuStream_t stream) {
  if (rows == 0) return;
  const int64_t row_blocks = std::min<int64_t>((rows + 7) / 8, 65535);
  pgemm::output_delta_kernel<<<dim3((width + 31) / 32, static_cast<unsigned>(row_blocks)), dim3(32, 8), 0, stream>>>(
      dy, ldy, z, dz, rows, static_cast<int>(width), act);
  TF_GPU_CHECK_LAUNCH("PortableMLP output delta");
}


}  // namespace tinyfuse::cuda
