// CUDA path of tinyfuse-bench (compiled only with TINYFUSE_BENCH_CUDA). Uses the CUDA runtime
// API for the stream, the events, device-to-device fills and the device properties; everything
// else goes through tinyfuse's public API.
#include "gpu_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <stdexcept>
#include <vector>

#include "tinyfuse/buffer.h"
#include "tinyfuse/factory.h"
#include "tinyfuse/random.h"

#include "copy_reference.h"
#include "gpu_timing.h"
#include "launch_floor.h"

namespace tinyfuse::bench {

namespace {

// 2^24 random values per dtype (64 MiB in FP32): the source every input buffer is copied from.
constexpr size_t kPoolElements = size_t{1} << 24;
constexpr size_t kSlotAlignment = 256;  // every rotated buffer starts 256-byte aligned

size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: spreads buffer numbers over pool offsets
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

struct GpuBench::Impl {
  GpuInfo info;
  FusedKernelOptions fused_kernels;
  cudaStream_t stream = nullptr;
  std::vector<float> host_pool;        // PCG32 uniform [-1, 1), made once
  std::map<DType, Buffer> device_pool;  // host_pool converted to each dtype asked for, on the GPU

  const Buffer& pool(DType dtype) {
    auto it = device_pool.find(dtype);
    if (it != device_pool.end()) return it->second;
    Buffer b(Device::CUDA, kPoolElements * dtype_size(dtype));
    // One row, so the copy (with its host-side dtype conversion) is a single transfer.
    copy_tensor(TensorView::matrix(b.data(), dtype, Device::CUDA, 1, static_cast<int64_t>(kPoolElements), stream),
                TensorView::matrix(host_pool.data(), 1, static_cast<int64_t>(kPoolElements)));
    check_cuda(cudaStreamSynchronize(stream), "random pool upload");
    return device_pool.emplace(dtype, std::move(b)).first->second;
  }

  // Fills `count` elements of `dtype` at `dst` from the pool, starting at an offset set by `salt`
  // and wrapping around; queued on the benchmark stream.
  void fill(void* dst, DType dtype, size_t count, uint64_t salt) {
    const Buffer& src = pool(dtype);
    const size_t es = dtype_size(dtype);
    size_t offset = static_cast<size_t>(mix(salt) % kPoolElements), done = 0;
    while (done < count) {
      const size_t n = std::min(count - done, kPoolElements - offset);
      check_cuda(cudaMemcpyAsync(static_cast<char*>(dst) + done * es, static_cast<const char*>(src.data()) + offset * es,
                            n * es, cudaMemcpyDeviceToDevice, stream),
            "filling an input buffer");
      done += n;
      offset = 0;
    }
  }

  // `buffers` slots of a (rows, cols) matrix of `dtype`, filled with distinct random data.
  struct Rotation {
    Buffer memory;
    std::vector<TensorView> views;
    size_t bytes_per_slot = 0;
  };
  Rotation make_rotation(DType dtype, int64_t rows, int64_t cols, int buffers, uint64_t salt) {
    Rotation r;
    const size_t count = static_cast<size_t>(rows) * static_cast<size_t>(cols);
    r.bytes_per_slot = round_up(count * dtype_size(dtype), kSlotAlignment);
    r.memory = Buffer(Device::CUDA, r.bytes_per_slot * static_cast<size_t>(buffers));
    for (int i = 0; i < buffers; ++i) {
      void* p = static_cast<char*>(r.memory.data()) + r.bytes_per_slot * static_cast<size_t>(i);
      fill(p, dtype, count, salt * 1000003u + static_cast<uint64_t>(i));
      r.views.push_back(TensorView::matrix(p, dtype, Device::CUDA, rows, cols, stream));
    }
    return r;
  }

  void settle() {
    // Setup work may sit on other streams (parameter uploads go on the per-thread default one).
    check_cuda(cudaDeviceSynchronize(), "setup");
  }

  void run_inference(const MlpCase& c, const TimingPlan& plan, uint64_t seed, CaseResult& r) {
    BuildOptions o;
    o.device = Device::CUDA;
    o.fused_kernels = fused_kernels;
    std::unique_ptr<Network> net = create_network(mlp_network_config(c.otype, c.width), c.width, c.width, o);
    describe_dtypes(*net, r);
    r.flop_per_sample = forward_flop_per_sample(*net);
    const size_t in_row = net->input_width() * dtype_size(net->input_dtype());
    r.bytes_per_sample = static_cast<double>(in_row + net->output_width() * dtype_size(net->output_dtype()));

    const int64_t n_params = static_cast<int64_t>(net->n_params());
    std::vector<float> host_params(static_cast<size_t>(n_params));
    Pcg32 param_rng(seed);
    net->initialize_params(param_rng, host_params.data());
    Buffer params(Device::CUDA, static_cast<size_t>(n_params) * dtype_size(net->param_dtype()));
    const TensorView pv = params.vector(net->param_dtype(), n_params, stream);
    if (n_params) copy_tensor(TensorView::matrix(pv.data, pv.dtype, Device::CUDA, 1, n_params, stream),
                              TensorView::matrix(host_params.data(), 1, n_params));
    net->set_params(pv, pv, TensorView{});

    const int buffers = rotation_buffers(static_cast<size_t>(c.batch) * in_row);
    Rotation in = make_rotation(net->input_dtype(), c.batch, net->input_width(), buffers, seed + 1);
    r.input_buffers = buffers;
    r.input_bytes = static_cast<double>(in.memory.bytes());
    Buffer output(Device::CUDA, static_cast<size_t>(c.batch) * net->padded_output_width() * dtype_size(net->output_dtype()));
    const TensorView out = output.matrix(net->output_dtype(), c.batch, net->padded_output_width(), stream);
    settle();

    const Timed t = time_with_events(plan, stream, [&](int i) {
      net->inference(in.views[static_cast<size_t>(i % buffers)], out);
    });
    r.seconds = t.gpu;
    r.host_seconds = t.host;

    const size_t out_row = net->padded_output_width() * dtype_size(net->output_dtype());
    if (out_row == in_row) {
      const size_t bytes = static_cast<size_t>(c.batch) * in_row;
      // Its runs go on through the rotation where the network's stopped: a buffer the network
      // read lately may still be in the L2.
      const int after = plan.warmup + plan.repeats;
      r.copy_seconds = time_with_events(plan, stream, [&](int i) {
        check_cuda(queue_copy_kernel(in.views[static_cast<size_t>((after + i) % buffers)].data, out.data, bytes, stream),
              "copy reference");
      }).gpu;
    }
  }

  void run_training(const MlpCase& c, const TimingPlan& plan, uint64_t seed, CaseResult& r) {
    BuildOptions o;
    o.device = Device::CUDA;
    o.fused_kernels = fused_kernels;
    Model m = create_from_config(c.width, c.width, mlp_training_config(c.otype, c.width), o, seed);
    const DifferentiableObject& model = *m.network;
    describe_dtypes(model, r);
    r.flop_per_sample = 3.0 * forward_flop_per_sample(model);
    // The GPU losses take FP32 targets whatever the network's output dtype.
    const DType target_dtype = DType::F32;
    const size_t in_row = model.input_width() * dtype_size(model.input_dtype());
    const size_t target_row = model.output_width() * dtype_size(target_dtype);
    r.bytes_per_sample = static_cast<double>(in_row + target_row);

    const int buffers = rotation_buffers(static_cast<size_t>(c.batch) * (in_row + target_row));
    Rotation in = make_rotation(model.input_dtype(), c.batch, model.input_width(), buffers, seed + 1);
    Rotation tg = make_rotation(target_dtype, c.batch, model.output_width(), buffers, seed + 2);
    r.input_buffers = buffers;
    r.input_bytes = static_cast<double>(in.memory.bytes() + tg.memory.bytes());
    settle();

    Trainer& trainer = *m.trainer;
    const Timed t = time_with_events(plan, stream, [&](int i) {
      const size_t k = static_cast<size_t>(i % buffers);
      trainer.training_step_async(in.views[k], tg.views[k]);
    });
    r.seconds = t.gpu;
    r.host_seconds = t.host;
    r.last_loss = trainer.last_loss();  // one read-back, after the timed runs
    r.loss_finite = std::isfinite(r.last_loss);
  }

  // After a failure: let queued work finish (or fail) and clear a non-sticky error, so the next
  // case starts clean. A sticky error (an illegal address, say) will fail every later case too.
  void recover() {
    cudaStreamSynchronize(stream);
    cudaDeviceSynchronize();
    cudaGetLastError();
  }
};

GpuBench::GpuBench(uint64_t seed, FusedKernelOptions fused_kernels) : impl_(std::make_unique<Impl>()) {
  impl_->fused_kernels = fused_kernels;
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count == 0) throw std::runtime_error("no CUDA device found");
  GpuInfo& g = impl_->info;
  check_cuda(cudaGetDevice(&g.index), "cudaGetDevice");
  cudaDeviceProp p{};
  check_cuda(cudaGetDeviceProperties(&p, g.index), "cudaGetDeviceProperties");
  g.name = p.name;
  g.cc_major = p.major;
  g.cc_minor = p.minor;
  g.sm_count = p.multiProcessorCount;
  g.memory_bytes = p.totalGlobalMem;
  g.l2_bytes = p.l2CacheSize;
  char bus[32];
  std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", static_cast<unsigned>(p.pciDomainID),
                static_cast<unsigned>(p.pciBusID), static_cast<unsigned>(p.pciDeviceID));
  g.pci_bus = bus;
  check_cuda(cudaDriverGetVersion(&g.driver_version), "cudaDriverGetVersion");
  check_cuda(cudaRuntimeGetVersion(&g.runtime_version), "cudaRuntimeGetVersion");
  check_cuda(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");

  impl_->host_pool.resize(kPoolElements);
  Pcg32 rng(seed);
  for (float& x : impl_->host_pool) x = rng.uniform(-1.0f, 1.0f);
}

GpuBench::~GpuBench() {
  if (!impl_) return;
  cudaStreamSynchronize(impl_->stream);
  impl_->device_pool.clear();
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
}

const GpuInfo& GpuBench::info() const { return impl_->info; }

GpuBench::Floor GpuBench::launch_floor(const TimingPlan& plan) {
  const Timed t = time_with_events(plan, impl_->stream, [&](int) { check_cuda(queue_empty_kernel(impl_->stream), "empty kernel"); });
  return {t.gpu, t.host};
}

CaseResult GpuBench::run(const MlpCase& c, const TimingPlan& plan, uint64_t seed) {
  CaseResult r;
  r.device = "cuda";
  r.network = c.otype;
  r.mode = c.mode;
  r.batch = c.batch;
  r.width = c.width;
  try {
    if (c.mode == Mode::Training)
      impl_->run_training(c, plan, seed, r);
    else
      impl_->run_inference(c, plan, seed, r);
    r.ok = true;
  } catch (const std::exception& e) {
    r.ok = false;
    r.error = e.what();
    impl_->recover();
  }
  return r;
}

}  // namespace tinyfuse::bench
