// tinyfuse-host-costs: what the host spends queuing one inference call, piece by piece. With the
// host waiting for each call (tinyfuse-bench's default timing), every nanosecond the host spends
// before the launch reaches the GPU is a nanosecond of the call: at 2^14 rows a whole
// FullyFusedMLP call is about 9 µs, most of it the host's launch. This probe times the pieces of
// that path on their own (runtime queries, the library's cached launch lookups, a tensor map,
// kernel launches with argument blocks of several sizes) and whole calls of FullyFusedMLP (with
// and without the tensor-copy kernel) and Width64FusedMLP, so a difference between two calls can
// be pinned on a piece.
//
// Each item, two ways: `rounds` rounds of `per_round` calls queued back to back, timed by the host
// clock, the GPU drained between rounds so launches never wait for room in the queue (the median
// over rounds of the time per call, and the fastest round); and 4 x `rounds` single calls, each
// timed alone with the GPU drained after it, as when the host waits for every call (median).
//
// Usage: tinyfuse-host-costs [--rounds 40] [--per-round 64] [--batch-log2 14] [--out FILE.json]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda/fused/fully_fused_mlp.h"
#include "cuda/fused/launch.h"
#include "cuda/fused/launch_config.h"
#include "cuda/fused/plan.h"
#include "cuda/primitives/tensor_maps.h"
#include "tinyfuse/tinyfuse.h"

namespace tf = tinyfuse;
namespace fused = tinyfuse::cuda::fused;

namespace {

template <int BYTES>
struct Blob {
  unsigned char bytes[BYTES];
};

__global__ void empty_kernel() {}

template <int BYTES>
__global__ void empty_kernel_with(Blob<BYTES> b) {
  if (b.bytes[0] == 1 && threadIdx.x == 1024) asm volatile("trap;");  // reads the argument; never true
}

__global__ void empty_kernel_smem() {
  extern __shared__ unsigned char smem[];
  if (threadIdx.x == 1024) smem[0] = 0;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Item {
  std::string name;
  double median_ns = 0, best_ns = 0;  // queued: rounds of calls back to back
  double waits_ns = 0;                // one call at a time, the GPU drained after each (untimed)
};

class Timer {
 public:
  Timer(int rounds, int per_round, cudaStream_t stream) : rounds_(rounds), per_round_(per_round), stream_(stream) {}

  // `before` runs untimed ahead of each single call (the one-at-a-time way only).
  Item time(const std::string& name, const std::function<void()>& call, const std::function<void()>& before = {}) {
    using Clock = std::chrono::steady_clock;
    for (int i = 0; i < per_round_; ++i) call();  // warm-up: caches, lazy loading
    check(cudaDeviceSynchronize(), name.c_str());
    std::vector<double> ns;
    for (int r = 0; r < rounds_; ++r) {
      const Clock::time_point t0 = Clock::now();
      for (int i = 0; i < per_round_; ++i) call();
      const double total = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
      ns.push_back(total / per_round_);
      check(cudaStreamSynchronize(stream_), name.c_str());
      check(cudaDeviceSynchronize(), name.c_str());
    }
    std::sort(ns.begin(), ns.end());
    std::vector<double> one;
    for (int i = 0; i < rounds_ * 4; ++i) {
      if (before) before();
      const Clock::time_point t0 = Clock::now();
      call();
      one.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
      check(cudaStreamSynchronize(stream_), name.c_str());
    }
    std::sort(one.begin(), one.end());
    Item it{name, ns[ns.size() / 2], ns.front(), one[one.size() / 2]};
    std::printf("  %-62s %9.0f ns %9.0f ns %9.0f ns\n", name.c_str(), it.median_ns, it.best_ns, it.waits_ns);
    return it;
  }

 private:
  int rounds_, per_round_;
  cudaStream_t stream_;
};

struct Net {
  std::unique_ptr<tf::Network> net;
  tf::Buffer params, in, out;
  tf::TensorView vin, vout;
};

Net make_net(const std::string& otype, int64_t batch, cudaStream_t stream, bool tma = true) {
  const tf::json config = {{"otype", otype}, {"n_neurons", 64}, {"n_hidden_layers", 2}, {"activation", "ReLU"},
                           {"output_activation", "None"}};
  tf::BuildOptions o;
  o.device = tf::Device::CUDA;
  o.fused_kernels.tma = tma;
  Net n;
  n.net = tf::create_network(config, 64, 64, o);
  const int64_t np = static_cast<int64_t>(n.net->n_params());
  n.params = tf::Buffer(tf::Device::CUDA, static_cast<size_t>(np) * 2);
  check(cudaMemset(n.params.data(), 0, n.params.bytes()), "parameters");
  const tf::TensorView pv = n.params.vector(n.net->param_dtype(), np, stream);
  n.net->set_params(pv, pv, tf::TensorView{});
  n.in = tf::Buffer(tf::Device::CUDA, static_cast<size_t>(batch) * 64 * 2);
  n.out = tf::Buffer(tf::Device::CUDA, static_cast<size_t>(batch) * n.net->padded_output_width() * 2);
  check(cudaMemset(n.in.data(), 0, n.in.bytes()), "input");
  n.vin = n.in.matrix(n.net->input_dtype(), batch, 64, stream);
  n.vout = n.out.matrix(n.net->output_dtype(), batch, n.net->padded_output_width(), stream);
  return n;
}

}  // namespace

int main(int argc, char** argv) try {
  int rounds = 40, per_round = 64, batch_log2 = 14;
  std::string out = "host-costs.json";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) rounds = std::stoi(argv[++i]);
    else if (a == "--per-round" && i + 1 < argc) per_round = std::stoi(argv[++i]);
    else if (a == "--batch-log2" && i + 1 < argc) batch_log2 = std::stoi(argv[++i]);
    else if (a == "--out" && i + 1 < argc) out = argv[++i];
    else throw std::runtime_error("unknown argument " + a + " (--rounds N --per-round N --batch-log2 N --out FILE)");
  }
  if (rounds < 3 || per_round < 1 || per_round > 512 || batch_log2 < 6 || batch_log2 > 22)
    throw std::runtime_error("--rounds >= 3, --per-round 1 .. 512, --batch-log2 6 .. 22");
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  const int64_t batch = int64_t{1} << batch_log2;
  std::printf("tinyfuse-host-costs on %s: host time per call: queued (%d rounds of %d calls: median, fastest round), one at a time (median)\n",
              prop.name, rounds, per_round);
  Timer t(rounds, per_round, stream);
  std::vector<Item> items;

  int dev = 0;
  items.push_back(t.time("cudaGetDevice", [&] { check(cudaGetDevice(&dev), "cudaGetDevice"); }));
  items.push_back(t.time("cudaGetLastError", [&] { (void)cudaGetLastError(); }));
  items.push_back(t.time("fused::device_limits (cached)", [&] { (void)fused::device_limits(); }));
  const size_t big_smem = 100 * 1024;
  check(cudaFuncSetAttribute(empty_kernel_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(big_smem)),
        "smem attribute");
  items.push_back(t.time("fused::persistent_grid_blocks (asked when planning; a locked table)", [&] {
    (void)fused::persistent_grid_blocks(fused::device_limits(), reinterpret_cast<const void*>(empty_kernel_smem), 256,
                                        big_smem, 256, 2);
  }));
  void* rows = nullptr;
  check(cudaMalloc(&rows, static_cast<size_t>(batch) * 128), "rows");
  CUtensorMap map;
  items.push_back(t.time("encode_row_tiles (one tensor map)", [&] {
    if (!fused::encode_row_tiles(&map, rows, batch, 64)) throw std::runtime_error("no tensor map");
  }));
  items.push_back(t.time("row_tiles (the same tensor map again: this thread's recent maps)", [&] {
    if (!fused::row_tiles(&map, rows, batch, 64)) throw std::runtime_error("no tensor map");
  }));
  cudaEvent_t ev;
  check(cudaEventCreateWithFlags(&ev, cudaEventDefault), "event");
  items.push_back(t.time("cudaEventRecord", [&] { check(cudaEventRecord(ev, stream), "record"); }));
  items.push_back(t.time("launch: empty kernel, 1 x 32 threads, no arguments", [&] {
    empty_kernel<<<1, 32, 0, stream>>>();
  }));
  items.push_back(t.time("launch: empty kernel, 64 B of arguments", [&] {
    empty_kernel_with<64><<<1, 32, 0, stream>>>(Blob<64>{});
  }));
  items.push_back(t.time("launch: empty kernel, 384 B of arguments (as the TMA kernel)", [&] {
    empty_kernel_with<384><<<1, 32, 0, stream>>>(Blob<384>{});
  }));
  items.push_back(t.time("launch: empty kernel, 1024 B of arguments", [&] {
    empty_kernel_with<1024><<<1, 32, 0, stream>>>(Blob<1024>{});
  }));
  items.push_back(t.time("launch: empty kernel, 128 x 256 threads, 100 KiB shared memory", [&] {
    empty_kernel_smem<<<128, 256, big_smem, stream>>>();
  }));

  const std::string b = "2^" + std::to_string(batch_log2);
  {
    Net ff = make_net("FullyFusedMLP", batch, stream);
    items.push_back(t.time("FullyFusedMLP inference " + b + ", tensor-copy kernel", [&] { ff.net->inference(ff.vin, ff.vout); }));
    if (tf::cuda::fused_kernel_used(*ff.net, fused::FusedPass::Inference) != fused::FusedKernel::WgmmaTma)
      std::printf("    (note: the tensor-copy kernel did not run)\n");
    fused::ForwardArgs args;
    args.batch = batch;
    args.input = ff.vin.data;
    args.ld_in = 64;
    args.weights = ff.params.data();
    args.output = ff.vout.data;
    args.ld_out = ff.vout.strides[0];
    fused::PlanInputs in;
    in.pass = fused::FusedPass::Inference;
    in.shape.width = 64, in.shape.in_width = 64, in.shape.out_width = static_cast<int>(ff.net->padded_output_width());
    in.shape.n_hidden = 2;
    in.batch = batch;
    in.layout.ld_in = args.ld_in;
    in.layout.ld_out = args.ld_out;
    in.layout.weights_aligned = true;
    in.device = &fused::device_limits();
    fused::PlanMemory plans;
    items.push_back(t.time("fused::PlanMemory::get " + b + " (the remembered plan)", [&] { (void)plans.get(in); }));
    items.push_back(t.time("fused::launch_plan " + b + " (no network checks), tensor-copy kernel",
                           [&] { fused::launch_plan(plans.get(in), args, nullptr, stream); }));
    // As tinyfuse-bench calls it: each call on the next of many inputs (the bench rotates them
    // so the L2 holds none), and an event recorded just before each call.
    const int n_inputs = 129;
    tf::Buffer many(tf::Device::CUDA, static_cast<size_t>(batch) * 64 * 2 * n_inputs);
    check(cudaMemset(many.data(), 0, many.bytes()), "inputs");
    std::vector<tf::TensorView> inputs;
    for (int i = 0; i < n_inputs; ++i)
      inputs.push_back(tf::TensorView::matrix(static_cast<char*>(many.data()) + static_cast<size_t>(batch) * 128 * i,
                                              tf::DType::F16, tf::Device::CUDA, batch, 64, stream));
    int next = 0;
    items.push_back(t.time("FullyFusedMLP inference " + b + ", the next of 129 inputs each call",
                           [&] { ff.net->inference(inputs[static_cast<size_t>(next++ % n_inputs)], ff.vout); }));
    items.push_back(t.time("FullyFusedMLP inference " + b + ", an event recorded before each (untimed)",
                           [&] { ff.net->inference(ff.vin, ff.vout); }, [&] { check(cudaEventRecord(ev, stream), "record"); }));
    items.push_back(t.time("launch: empty kernel, an event recorded before each (untimed)",
                           [&] { empty_kernel<<<1, 32, 0, stream>>>(); }, [&] { check(cudaEventRecord(ev, stream), "record"); }));
    Net rows_net = make_net("FullyFusedMLP", batch, stream, /*tma=*/false);
    items.push_back(t.time("FullyFusedMLP inference " + b + ", row-copying kernel",
                           [&] { rows_net.net->inference(rows_net.vin, rows_net.vout); }));
    items.push_back(t.time("FullyFusedMLP inference " + b + ", row-copying kernel, the next of 129 inputs each call",
                           [&] { rows_net.net->inference(inputs[static_cast<size_t>(next++ % n_inputs)], rows_net.vout); }));
  }
  try {
    Net w = make_net("Width64FusedMLP", batch, stream);
    items.push_back(t.time("Width64FusedMLP inference " + b, [&] { w.net->inference(w.vin, w.vout); }));
    items.push_back(t.time("Width64FusedMLP inference " + b + ", an event recorded before each (untimed)",
                           [&] { w.net->inference(w.vin, w.vout); }, [&] { check(cudaEventRecord(ev, stream), "record"); }));
  } catch (const tf::Error& e) {
    std::printf("  Width64FusedMLP: %s\n", e.what());
  }

  nlohmann::json j = {{"device", prop.name}, {"rounds", rounds}, {"per_round", per_round}, {"batch_log2", batch_log2},
                      {"items", nlohmann::json::array()}};
  for (const Item& it : items) j["items"].push_back({{"name", it.name}, {"median_ns", it.median_ns}, {"best_ns", it.best_ns}, {"waits_ns", it.waits_ns}});
  std::ofstream(out) << j.dump(2) << '\n';
  std::printf("wrote %s\n", out.c_str());
  cudaFree(rows);
  cudaEventDestroy(ev);
  cudaStreamDestroy(stream);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "tinyfuse-host-costs: %s\n", e.what());
  return 1;
}
