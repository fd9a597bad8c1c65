// Probe: FullyFusedMLP inference on Hopper warpgroup products (src/cuda/fused/wgmma_kernel.cuh)
// before it goes into the library. For WIDTH -> WIDTH x 2 -> WIDTH (ReLU, FP16, no biases) it
//  - checks the kernel against a plain per-row GPU reference with the same rounding points
//    (FP32 sums, FP16 after every layer) on an odd batch, outputs poisoned with NaN first;
//  - times it as tinyfuse-bench does (events around each launch after warm-up, median of the
//    timed runs, inputs rotated over more bytes than the L2 holds) at 2^14 .. 2^22;
//  - prints a table and writes JSON (argv[1], default wgmma-probe.json).
// Build (sm_90a): nvcc -O3 -std=c++17 -arch=sm_90a -I src benchmarks/experiments/wgmma_probe.cu
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/fused/wgmma_kernel.cuh"

namespace wg = tinyfuse::cuda::fused::wgmma;

#define CHECK(x)                                                                           \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

// One thread per row: z = x W^T summed in FP32, rounded to FP16, ReLU on hidden layers.
__global__ void reference_kernel(const __half* w, int width, int n_layers, const __half* in, __half* out,
                                 int64_t batch) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (row >= batch) return;
  float x[128], y[128];
  for (int i = 0; i < width; ++i) x[i] = __half2float(in[row * width + i]);
  for (int l = 0; l < n_layers; ++l) {
    const __half* wl = w + static_cast<int64_t>(l) * width * width;
    for (int n = 0; n < width; ++n) {
      float s = 0.0f;
      for (int k = 0; k < width; ++k) s += x[k] * __half2float(wl[n * width + k]);
      float v = __half2float(__float2half_rn(s));
      if (l + 1 < n_layers) v = v > 0.0f ? v : 0.0f;
      y[n] = v;
    }
    for (int n = 0; n < width; ++n) x[n] = y[n];
  }
  for (int n = 0; n < width; ++n) out[row * width + n] = __float2half_rn(x[n]);
}

struct Result {
  int width, groups;
  int64_t batch;
  double seconds, samples_per_s, tflops;
};

template <int WIDTH, int GROUPS>
struct Probe {
  static constexpr int kHidden = 2;
  static size_t smem() { return wg::inference_smem<WIDTH, GROUPS>(kHidden); }

  static int blocks_per_sm() {
    auto k = wg::mlp_inference_kernel<WIDTH, GROUPS>;
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem())));
    int n = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, GROUPS * 128, smem()));
    return n;
  }

  static void launch(const __half* w, const __half* in, __half* out, int64_t batch, int sms, int per_sm,
                     cudaStream_t st) {
    const int64_t tiles = (batch + wg::kGroupRows - 1) / wg::kGroupRows;
    const int64_t blocks = std::min<int64_t>((tiles + GROUPS - 1) / GROUPS, static_cast<int64_t>(sms) * per_sm);
    wg::mlp_inference_kernel<WIDTH, GROUPS>
        <<<static_cast<unsigned>(blocks), GROUPS * 128, smem(), st>>>(w, kHidden, in, out, batch, tiles);
  }

  // Returns false when the kernel's output differs from the reference.
  static bool check(const __half* w, int sms, int per_sm) {
    const int64_t batch = 65536 + 17;
    const size_t n = static_cast<size_t>(batch) * WIDTH;
    std::vector<__half> h_in(n);
    std::mt19937 rng(1234 + WIDTH);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto& v : h_in) v = __float2half(u(rng));
    __half *in, *out, *ref;
    CHECK(cudaMalloc(&in, n * 2));
    CHECK(cudaMalloc(&out, n * 2 + 64));
    CHECK(cudaMalloc(&ref, n * 2));
    CHECK(cudaMemcpy(in, h_in.data(), n * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(out, 0xFF, n * 2 + 64));  // NaN everywhere, and past the end
    launch(w, in, out, batch, sms, per_sm, 0);
    CHECK(cudaGetLastError());
    reference_kernel<<<static_cast<unsigned>((batch + 127) / 128), 128>>>(w, WIDTH, kHidden + 1, in, ref, batch);
    CHECK(cudaDeviceSynchronize());
    std::vector<__half> h_out(n + 32), h_ref(n);
    CHECK(cudaMemcpy(h_out.data(), out, n * 2 + 64, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(h_ref.data(), ref, n * 2, cudaMemcpyDeviceToHost));
    double max_abs = 0, num = 0, den = 0;
    int64_t unwritten = 0, wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      const float a = __half2float(h_out[i]), b = __half2float(h_ref[i]);
      if (!std::isfinite(a)) {
        ++unwritten;
        continue;
      }
      const double e = std::fabs(static_cast<double>(a) - b);
      max_abs = std::max(max_abs, e);
      num += e * e;
      den += static_cast<double>(b) * b;
      if (e > 5e-3 + 5e-3 * std::fabs(b)) ++wrong;
    }
    int64_t overrun = 0;  // the 32 values past the batch must still be the poison
    for (size_t i = n; i < n + 32; ++i) overrun += std::isfinite(__half2float(h_out[i])) ? 1 : 0;
    const double l2 = std::sqrt(num / std::max(den, 1e-30));
    std::printf("check width %d groups %d batch %lld: max abs %.3g, normalised L2 %.3g, unwritten %lld, "
                "beyond tolerance %lld, written past the end %lld\n",
                WIDTH, GROUPS, static_cast<long long>(batch), max_abs, l2, static_cast<long long>(unwritten),
                static_cast<long long>(wrong), static_cast<long long>(overrun));
    CHECK(cudaFree(in));
    CHECK(cudaFree(out));
    CHECK(cudaFree(ref));
    return unwritten == 0 && wrong == 0 && overrun == 0 && l2 <= 2e-3;
  }

  static void time(const __half* w, int sms, int per_sm, std::vector<Result>& results) {
    for (int lg = 14; lg <= 22; lg += 2) {
      const int64_t batch = int64_t{1} << lg;
      const size_t bytes = static_cast<size_t>(batch) * WIDTH * 2;
      const int buffers = static_cast<int>(std::max<size_t>(2, (size_t{512} << 20) / bytes + 1));
      __half *in, *out;
      CHECK(cudaMalloc(&in, bytes * buffers));
      CHECK(cudaMalloc(&out, bytes * buffers));
      CHECK(cudaMemset(in, 0x3C, bytes * buffers));  // 1.0 + a little: finite values
      const int warmup = 5, repeats = 50;
      std::vector<cudaEvent_t> ev(2 * repeats);
      for (auto& e : ev) CHECK(cudaEventCreate(&e));
      for (int i = 0; i < warmup + repeats; ++i) {
        const size_t off = static_cast<size_t>(i % buffers) * batch * WIDTH;
        if (i >= warmup) CHECK(cudaEventRecord(ev[2 * (i - warmup)], 0));
        launch(w, in + off, out + off, batch, sms, per_sm, 0);
        if (i >= warmup) CHECK(cudaEventRecord(ev[2 * (i - warmup) + 1], 0));
      }
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaGetLastError());
      std::vector<double> t(repeats);
      for (int i = 0; i < repeats; ++i) {
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
        t[i] = ms * 1e-3;
      }
      std::sort(t.begin(), t.end());
      const double med = t[repeats / 2];
      const double flop = 2.0 * (kHidden + 1) * WIDTH * WIDTH * static_cast<double>(batch);
      results.push_back({WIDTH, GROUPS, batch, med, batch / med, flop / med * 1e-12});
      for (auto& e : ev) CHECK(cudaEventDestroy(e));
      CHECK(cudaFree(in));
      CHECK(cudaFree(out));
    }
  }

  static bool run(int sms, std::vector<Result>& results) {
    const int per_sm = blocks_per_sm();
    std::printf("width %d, %d warpgroups per block: %zu bytes of shared memory, %d block(s) per SM\n", WIDTH, GROUPS,
                smem(), per_sm);
    if (per_sm < 1) return false;
    const size_t n_w = static_cast<size_t>(kHidden + 1) * WIDTH * WIDTH;
    std::vector<__half> h_w(n_w);
    std::mt19937 rng(99 + WIDTH);
    std::normal_distribution<float> g(0.0f, 1.0f / std::sqrt(static_cast<float>(WIDTH)));
    for (auto& v : h_w) v = __float2half(g(rng));
    __half* w;
    CHECK(cudaMalloc(&w, n_w * 2));
    CHECK(cudaMemcpy(w, h_w.data(), n_w * 2, cudaMemcpyHostToDevice));
    const bool ok = check(w, sms, per_sm);
    if (ok) time(w, sms, per_sm, results);
    CHECK(cudaFree(w));
    return ok;
  }
};

int main(int argc, char** argv) {
  const std::string json_path = argc > 1 ? argv[1] : "wgmma-probe.json";
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  if (prop.major != 9 || prop.minor != 0) {
    std::printf("skipped: needs an sm_90 GPU (wgmma)\n");
    return 0;
  }
  const int sms = prop.multiProcessorCount;
  std::vector<Result> results;
  bool ok = true;
  ok &= Probe<64, 2>::run(sms, results);
  ok &= Probe<64, 3>::run(sms, results);
  ok &= Probe<64, 4>::run(sms, results);
  ok &= Probe<128, 2>::run(sms, results);
  ok &= Probe<128, 3>::run(sms, results);
  std::printf("\n%-6s %-7s %-6s %12s %14s %10s\n", "width", "groups", "batch", "median us", "samples/s", "TFLOP/s");
  FILE* f = std::fopen(json_path.c_str(), "w");
  if (f) std::fprintf(f, "{\"device\": \"%s\", \"results\": [\n", prop.name);
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::printf("%-6d %-7d 2^%-4d %12.2f %12.3f G %10.1f\n", r.width, r.groups,
                static_cast<int>(std::log2(static_cast<double>(r.batch))), r.seconds * 1e6, r.samples_per_s * 1e-9,
                r.tflops);
    if (f)
      std::fprintf(f,
                   "  {\"width\": %d, \"groups\": %d, \"batch\": %lld, \"median_s\": %.9g, \"samples_per_s\": %.6g, "
                   "\"tflops\": %.4g}%s\n",
                   r.width, r.groups, static_cast<long long>(r.batch), r.seconds, r.samples_per_s, r.tflops,
                   i + 1 < results.size() ? "," : "");
  }
  if (f) {
    std::fprintf(f, "], \"correct\": %s}\n", ok ? "true" : "false");
    std::fclose(f);
  }
  std::printf("%s\n", ok ? "all checks passed" : "CHECK FAILED");
  return ok ? 0 : 1;
}
