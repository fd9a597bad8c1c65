// tinyfuse-bench's CUDA HashGrid rows. The grid comes straight from the CUDA backend's factory
// (cuda/encodings/grid_encoding.h) so the rows do not depend on the encoding dispatch.
//
// Byte model (least DRAM traffic per sample, D dims, L = 16 levels, F = 2 features, FP16 table
// and output, FP32 inputs): forward = 4D (input) + 2·L·F (output) + L·2^D·F·2 (one read of each
// corner's features); backward adds 4D (input again) + 2·L·F (dL/doutput) + L·2^D·F·4 (one FP32
// gradient write per corner feature) + n_params·(4 + 4 + 2 + 2)/batch (zeroing the FP32 sums,
// reading them, reading and writing the FP16 gradients). Real lookups move 32-byte sectors, so
// the model is a floor: the hardware-limit ratio says how far from it a run is.
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>

#include "core/encodings/grid_config.h"
#include "cuda/encodings/grid_encoding.h"
#include "encoding_bench.h"
#include "gpu_bench.h"
#include "gpu_timing.h"
#include "tinyfuse/buffer.h"
#include "tinyfuse/random.h"

namespace tinyfuse::bench {

namespace {

json hash_grid_config(bool deterministic) {
  return {{"otype", "HashGrid"}, {"n_levels", 16}, {"n_features_per_level", 2}, {"log2_hashmap_size", 19},
          {"base_resolution", 16}, {"per_level_scale", 2.0}, {"deterministic", deterministic}};
}

double bytes_per_sample(uint32_t dims, bool backward, size_t n_params, int64_t batch) {
  const double L = 16, F = 2, corners = double(1u << dims);
  double b = 4.0 * dims + 2 * L * F + L * corners * F * 2;
  if (backward) b += 4.0 * dims + 2 * L * F + L * corners * F * 4 + double(n_params) * 12 / double(batch);
  return b;
}

EncodingResult run_case(cudaStream_t stream, uint32_t dims, bool backward, bool deterministic, int64_t batch,
                        const TimingPlan& plan) {
  EncodingResult r;
  r.name = "HashGrid " + std::to_string(dims) + "D";
  r.mode = backward ? "forward+backward" : "forward";
  r.backward_mode = backward ? (deterministic ? "deterministic" : "fast") : "";
  r.batch = batch;
  try {
    auto enc = cuda::make_grid_encoding(parse_grid_config(hash_grid_config(deterministic), "encoding", dims),
                                        DType::F16, DType::F16);
    r.n_params = enc->n_params();
    r.param_dtype = to_string(enc->param_dtype());
    r.output_dtype = to_string(enc->output_dtype());
    r.bytes_per_sample = bytes_per_sample(dims, backward, r.n_params, batch);
    const int64_t n = static_cast<int64_t>(r.n_params);
    Buffer params(Device::CUDA, r.n_params * 2), grads(Device::CUDA, r.n_params * 2);
    std::vector<float> host(r.n_params);
    Pcg32 rng(1337);
    enc->initialize_params(rng, host.data(), 1e3f);  // +-0.1: values well inside FP16's range
    copy_tensor(TensorView::matrix(params.data(), DType::F16, Device::CUDA, 1, n),
                TensorView::matrix(host.data(), 1, n));
    const TensorView pv = params.vector(DType::F16, n, stream);
    enc->set_params(pv, pv, grads.vector(DType::F16, n, stream));

    // Inputs in [0, 1): several buffers, together past the L2, cycled through.
    const uint32_t w = enc->padded_output_width();
    const size_t in_bytes = size_t(batch) * dims * sizeof(float);
    const int buffers = rotation_buffers(in_bytes);
    Buffer inputs(Device::CUDA, in_bytes * buffers);
    {
      std::vector<float> x(size_t(batch) * dims * buffers);
      for (auto& v : x) v = rng.next_float();
      copy_tensor(TensorView::matrix(inputs.data(), DType::F32, Device::CUDA, 1, int64_t(x.size())),
                  TensorView::matrix(x.data(), 1, int64_t(x.size())));
    }
    Buffer out(Device::CUDA, size_t(batch) * w * 2), dout(Device::CUDA, size_t(batch) * w * 2);
    {
      std::vector<float> g(size_t(batch) * w);
      for (auto& v : g) v = rng.next_float() - 0.5f;
      copy_tensor(TensorView::matrix(dout.data(), DType::F16, Device::CUDA, batch, w),
                  TensorView::matrix(g.data(), batch, w));
    }
    const TensorView ov = out.matrix(DType::F16, batch, w, stream), dv = dout.matrix(DType::F16, batch, w, stream);
    check_cuda(cudaDeviceSynchronize(), "setup");

    auto work = [&](int i) {
      const TensorView iv = TensorView::matrix(static_cast<char*>(inputs.data()) + in_bytes * size_t(i % buffers),
                                               DType::F32, Device::CUDA, batch, dims, stream);
      if (backward) {
        auto ctx = enc->forward(iv, &ov);
        enc->backward(*ctx, iv, ov, dv, nullptr, false, GradientMode::Overwrite);
      } else {
        enc->inference(iv, ov);
      }
    };
    std::vector<cudaEvent_t> ev(2 * size_t(plan.repeats));
    for (auto& e : ev) check_cuda(cudaEventCreate(&e), "cudaEventCreate");
    int run = 0;
    for (int i = 0; i < plan.warmup; ++i) work(run++);
    check_cuda(cudaStreamSynchronize(stream), "warm-up");
    for (int i = 0; i < plan.repeats; ++i) {
      check_cuda(cudaEventRecord(ev[2 * i], stream), "cudaEventRecord");
      work(run++);
      check_cuda(cudaEventRecord(ev[2 * i + 1], stream), "cudaEventRecord");
      if (plan.sync_each_run) check_cuda(cudaEventSynchronize(ev[2 * i + 1]), "timed run");
    }
    check_cuda(cudaStreamSynchronize(stream), "timed runs");
    std::vector<double> seconds;
    for (int i = 0; i < plan.repeats; ++i) {
      float ms = 0;
      check_cuda(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
      seconds.push_back(ms * 1e-3);
    }
    for (auto& e : ev) cudaEventDestroy(e);
    r.seconds = summarize(std::move(seconds));
    r.ok = true;
  } catch (const std::exception& e) {
    r.error = e.what();
    cudaDeviceSynchronize();
    cudaGetLastError();
  }
  return r;
}

}  // namespace

std::vector<EncodingResult> run_gpu_encoding_benchmarks(const TimingPlan& plan, const std::vector<int64_t>& batches) {
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  std::vector<EncodingResult> out;
  for (uint32_t dims : {2u, 3u})
    for (int variant = 0; variant < 3; ++variant)  // forward, fast backward, deterministic backward
      for (int64_t batch : batches) out.push_back(run_case(stream, dims, variant > 0, variant == 2, batch, plan));
  cudaStreamDestroy(stream);
  return out;
}

}  // namespace tinyfuse::bench
