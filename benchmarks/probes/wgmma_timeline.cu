// tinyfuse-wgmma-timeline: where one FullyFusedMLP inference call spends its time on a Hopper
// GPU. Runs the 64 -> 64 x 2 -> 64 FP16 network on both Hopper kernels, the one that copies
// rows itself (wgmma_kernel.cuh, "production" below: the square instance) and the one that
// moves whole tiles by tensor copies (hopper/tma_kernel.cuh, "tma"), with timeline marks: every
// warp records the global timer and its SM's clock at the kernel's milestones (wgmma::Mark). A
// copy kernel of the same bytes records its own start and finish the same way. Each call is
// timed by CUDA events with the host waiting for it, as tinyfuse-bench does by default, inputs
// rotated over 256 MB so the L2 holds none of them. Also: the two kernels compared bit for bit
// (outputs poisoned first), the host's cost of a tensor map and launch shapes of the row-copying
// kernel. The kernels' marks are compiled in by TINYFUSE_KERNEL_TIMELINE (this unit only; the
// library's kernels have none) and switched on per series through c_marking.
//
// Usage: tinyfuse-wgmma-timeline [--batches 14,16,18] [--calls 40] [--out timeline.json]
//        tinyfuse-wgmma-timeline --only production|tma|copy [--batches ..] [--calls N]
// The second form runs one kernel `calls` times per batch and nothing else: for ncu
// (scripts/gpu/tinyfuse-gpu timeline).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

// The kernels' timeline marks (hopper/wgmma_kernel.cuh): compiled into this unit only.
#define TINYFUSE_KERNEL_TIMELINE
__device__ void tf_timeline_mark(int k);  // defined below, once the marks' count is known

#include "cuda/primitives/tensor_maps.h"
#include "cuda/fused/hopper/wgmma_kernel.cuh"
#include "cuda/fused/hopper/tma_kernel.cuh"

namespace tf = tinyfuse;
namespace wg = tinyfuse::cuda::fused::wgmma;
using tinyfuse::cuda::fused::Epilogue;

namespace {

// [warp][mark][0: global timer ns, 1: SM clock]; a mark never reached stays 0. A warp keeps its
// marks in the last bytes of its block's dynamic shared memory (the launches below add room
// for them) and copies them out at its last mark, so a mark costs a few instructions, not a
// global store whose address must first come from memory.
__device__ unsigned long long* g_marks;
__device__ unsigned* g_smid;

template <int PER_WARP>
__device__ __forceinline__ void mark(int k) {
  extern __shared__ __align__(16) unsigned char probe_smem[];
  if ((threadIdx.x & 31) != 0) return;
  unsigned size;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(size));
  const unsigned warps = blockDim.x / 32, warp = threadIdx.x / 32;
  unsigned long long* mine = reinterpret_cast<unsigned long long*>(probe_smem + size - warps * PER_WARP * 16) + warp * PER_WARP * 2;
  if (k == 0)
    for (int i = 0; i < 2 * PER_WARP; ++i) mine[i] = 0;
  unsigned long long gt;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
  mine[2 * k] = gt;
  mine[2 * k + 1] = clock64();
  if (k == PER_WARP - 1) {  // the last mark: out to global memory
    const unsigned global_warp = blockIdx.x * warps + warp;
    for (int i = 0; i < 2 * PER_WARP; ++i) g_marks[static_cast<size_t>(global_warp) * PER_WARP * 2 + i] = mine[i];
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    g_smid[global_warp] = id;
  }
}
constexpr size_t marks_smem(int warps, int per_warp) { return static_cast<size_t>(warps) * per_warp * 16; }

// Whether the kernels record their marks: set around the marked series only, so that the other
// series time the kernels with a constant-cache load per mark and nothing else.
__constant__ bool c_marking;
bool g_marking_now = false;  // what c_marking holds
void set_marking(bool on) {  // a series' first (warm-up) launch changes it, outside the timed calls
  if (on == g_marking_now) return;
  if (cudaMemcpyToSymbol(c_marking, &on, sizeof(on)) != cudaSuccess) throw std::runtime_error("cannot set c_marking");
  g_marking_now = on;
}

}  // namespace

__device__ void tf_timeline_mark(int k) {
  if (c_marking) mark<wg::kMarkCount>(k);
}

namespace {

// The copy reference (benchmarks/copy_reference.cu), with a mark at the start and one after its
// store (which waits for the load).
constexpr int kCopyThreads = 256;
template <bool MARK>
__global__ void copy_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, size_t chunks) {
  if (MARK) mark<2>(0);
  const size_t i = static_cast<size_t>(blockIdx.x) * kCopyThreads + threadIdx.x;
  if (i < chunks) __stcs(out + i, __ldcs(in + i));
  if (MARK) mark<2>(1);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

constexpr int kWidth = 64, kStages = 2;
using Kernel = void (*)(tf::cuda::fused::KernelShape, tf::cuda::fused::ForwardArgs, wg::Plan);
Kernel square_kernel() {
  return wg::inference_kernel<__half, kWidth, kStages, Epilogue::Relu, Epilogue::Identity, true>;
}

struct Setup {
  int64_t batch;
  int buffers;
  std::vector<__half*> inputs;
  __half* output = nullptr;
  __half* weights = nullptr;
  unsigned long long* marks = nullptr;
  unsigned* smid = nullptr;
  size_t max_warps = 0;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

struct Shape {
  int groups, blocks_per_sm;
};

class Probe {
 public:
  Probe() {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
    check(cudaEventCreate(&start_), "event");
    check(cudaEventCreate(&stop_), "event");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "properties");
    sms_ = prop.multiProcessorCount;
    name_ = prop.name;
    if (prop.major != 9 || prop.minor != 0) throw std::runtime_error("needs compute capability 9.0 (sm_90a)");
  }
  int sms() const { return sms_; }
  const std::string& name() const { return name_; }

  // Times `calls` runs of `launch(run)` with the host waiting for each; before each (untimed)
  // `prepare()`, after each `after(i)`.
  template <typename Prepare, typename Launch, typename After>
  std::vector<double> time_calls(int warmup, int calls, Prepare&& prepare, Launch&& launch, After&& after) {
    for (int i = 0; i < warmup; ++i) {
      launch(run_++);
      check(cudaStreamSynchronize(stream_), "warm-up");
    }
    std::vector<double> us;
    for (int i = 0; i < calls; ++i) {
      prepare();
      check(cudaEventRecord(start_, stream_), "record");
      launch(run_++);
      check(cudaEventRecord(stop_, stream_), "record");
      check(cudaEventSynchronize(stop_), "call");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, start_, stop_), "elapsed");
      us.push_back(ms * 1e3);
      after(i);
    }
    return us;
  }

  template <bool MARK>
  void launch_net(const Setup& s, int run, Shape shape, int64_t rows = 0) {
    tf::cuda::fused::FusedShape fs;
    fs.width = kWidth;
    fs.in_width = kWidth;
    fs.out_width = kWidth;
    fs.n_hidden = 2;
    fs.act = tf::Activation::ReLU;
    fs.out_act = tf::Activation::None;
    tf::cuda::fused::ForwardArgs args;
    args.batch = rows ? rows : s.batch;
    args.input = s.inputs[static_cast<size_t>(run % s.buffers)];
    args.ld_in = kWidth;
    args.weights = s.weights;
    args.output = s.output;
    args.ld_out = kWidth;
    const wg::Plan p = wg::make_plan(kWidth, fs, args.ld_in, args.ld_out, args.batch, 2);
    const size_t smem = wg::launch_smem_bytes(p, shape.groups, kStages, kWidth, 2) +
                        (MARK ? marks_smem(shape.groups * 4, wg::kMarkCount) : 0);
    const auto kernel = square_kernel();
    set_marking(MARK);
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)), "smem");
    const int64_t blocks = std::min<int64_t>((p.n_tiles + shape.groups - 1) / shape.groups,
                                             static_cast<int64_t>(shape.blocks_per_sm) * sms_);
    kernel<<<static_cast<unsigned>(blocks), shape.groups * wg::kGroupThreads, smem, stream_>>>(
        tf::cuda::fused::kernel_shape(fs, true), args, p);
    check(cudaGetLastError(), "launch");
  }
  // The TMA kernel (hopper/tma_kernel.cuh) on the same rows.
  template <bool MARK>
  void launch_tma(const Setup& s, int run, int64_t rows = 0) {
    const int64_t batch = rows ? rows : s.batch;
    CUtensorMap in_map, out_map;
    if (!tf::cuda::fused::encode_row_tiles(&in_map, s.inputs[static_cast<size_t>(run % s.buffers)], batch, kWidth) ||
        !tf::cuda::fused::encode_row_tiles(&out_map, s.output, batch, kWidth))
      throw std::runtime_error("tensor map encoding failed");
    wg::TmaPlan p;
    p.weights_bytes = 3 * wg::layer_bytes(kWidth, kWidth);
    p.n_tiles = (batch + wg::kGroupRows - 1) / wg::kGroupRows;
    const size_t smem = wg::tma_smem_bytes(p.weights_bytes, wg::kTmaGroups) +
                        (MARK ? marks_smem(wg::kTmaGroups * 4, wg::kMarkCount) : 0);
    const auto kernel = wg::tma_inference_kernel<__half, Epilogue::Relu, Epilogue::Identity>;
    set_marking(MARK);
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)), "smem");
    const int64_t blocks = std::min<int64_t>((p.n_tiles + wg::kTmaGroups - 1) / wg::kTmaGroups, int64_t{2} * sms_);
    tf::cuda::fused::FusedShape fs;
    fs.width = kWidth;
    fs.in_width = kWidth;
    fs.out_width = kWidth;
    fs.n_hidden = 2;
    kernel<<<static_cast<unsigned>(blocks), wg::kTmaGroups * wg::kGroupThreads, smem, stream_>>>(
        in_map, out_map, tf::cuda::fused::kernel_shape(fs, true), reinterpret_cast<const uint16_t*>(s.weights), p);
    check(cudaGetLastError(), "tma launch");
  }
  template <bool MARK>
  void launch_copy(const Setup& s, int run) {
    const size_t chunks = static_cast<size_t>(s.batch) * kWidth * 2 / 16;
    const unsigned blocks = static_cast<unsigned>((chunks + kCopyThreads - 1) / kCopyThreads);
    copy_kernel<MARK><<<blocks, kCopyThreads, MARK ? marks_smem(kCopyThreads / 32, 2) : 0, stream_>>>(
        reinterpret_cast<const uint4*>(s.inputs[static_cast<size_t>(run % s.buffers)]), reinterpret_cast<uint4*>(s.output),
        chunks);
    check(cudaGetLastError(), "copy launch");
  }
  void clear_marks(const Setup& s, int per_warp) {
    check(cudaMemsetAsync(s.marks, 0, s.max_warps * per_warp * 2 * sizeof(unsigned long long), stream_), "memset");
  }

 private:
  cudaStream_t stream_{};
  cudaEvent_t start_{}, stop_{};
  int sms_ = 0, run_ = 0;
  std::string name_;
};

Setup make_setup(int64_t batch, int sms) {
  Setup s;
  s.batch = batch;
  const size_t bytes = static_cast<size_t>(batch) * kWidth * sizeof(__half);
  s.buffers = static_cast<int>(std::max<size_t>(4, (size_t{256} << 20) / bytes + 1));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<__half> host(static_cast<size_t>(batch) * kWidth);
  for (auto& h : host) h = __float2half(u(rng));
  for (int i = 0; i < s.buffers; ++i) {
    __half* p = nullptr;
    check(cudaMalloc(&p, bytes), "input");
    check(cudaMemcpy(p, host.data(), bytes, cudaMemcpyHostToDevice), "input upload");
    s.inputs.push_back(p);
  }
  check(cudaMalloc(&s.output, bytes), "output");
  std::vector<__half> w(3 * kWidth * kWidth);
  for (auto& h : w) h = __float2half(0.2f * u(rng));
  check(cudaMalloc(&s.weights, w.size() * sizeof(__half)), "weights");
  check(cudaMemcpy(s.weights, w.data(), w.size() * sizeof(__half), cudaMemcpyHostToDevice), "weights upload");
  // Enough warps for the largest launch of either kernel.
  const size_t copy_warps = (static_cast<size_t>(batch) * kWidth * 2 / 16 + kCopyThreads - 1) / kCopyThreads * (kCopyThreads / 32);
  s.max_warps = std::max<size_t>(copy_warps, static_cast<size_t>(sms) * 4 * 8);
  check(cudaMalloc(&s.marks, s.max_warps * wg::kMarkCount * 2 * sizeof(unsigned long long)), "marks");
  check(cudaMalloc(&s.smid, s.max_warps * sizeof(unsigned)), "smid");
  check(cudaMemcpyToSymbol(g_marks, &s.marks, sizeof(s.marks)), "marks symbol");
  check(cudaMemcpyToSymbol(g_smid, &s.smid, sizeof(s.smid)), "smid symbol");
  return s;
}

void free_setup(Setup& s) {
  for (auto* p : s.inputs) cudaFree(p);
  cudaFree(s.output);
  cudaFree(s.weights);
  cudaFree(s.marks);
  cudaFree(s.smid);
}

// One call's marks: per warp that started, each mark's global time and SM clock.
struct CallMarks {
  std::vector<std::vector<unsigned long long>> gt, clk;  // [warp][mark]
  std::vector<unsigned> smid;
};
CallMarks fetch_marks(const Setup& s, size_t warps, int per_warp) {
  std::vector<unsigned long long> raw(warps * per_warp * 2);
  std::vector<unsigned> smid(warps);
  check(cudaMemcpy(raw.data(), s.marks, raw.size() * sizeof(raw[0]), cudaMemcpyDeviceToHost), "marks");
  check(cudaMemcpy(smid.data(), s.smid, smid.size() * sizeof(unsigned), cudaMemcpyDeviceToHost), "smid");
  CallMarks m;
  for (size_t w = 0; w < warps; ++w) {
    if (raw[w * per_warp * 2] == 0) continue;  // no such warp in this launch
    std::vector<unsigned long long> g(per_warp), c(per_warp);
    for (int k = 0; k < per_warp; ++k) g[k] = raw[(w * per_warp + k) * 2], c[k] = raw[(w * per_warp + k) * 2 + 1];
    m.gt.push_back(g);
    m.clk.push_back(c);
    m.smid.push_back(smid[w]);
  }
  return m;
}

const char* kMarkNames[] = {"entry",       "issued",      "staged",      "tile0 landed", "tile0 computed",
                            "tile0 stored", "tile1 landed", "tile1 computed", "tile1 stored", "tile2 landed",
                            "tile2 computed", "tile2 stored", "end"};

// When the warps reach each mark (ns after the call's first warp start) and each step's SM cycles.
nlohmann::json summarize(const CallMarks& m, int per_warp, const char* const* names, bool print) {
  unsigned long long t0 = ~0ull;
  for (const auto& g : m.gt) t0 = std::min(t0, g[0]);
  nlohmann::json j = nlohmann::json::array();
  for (int k = 0; k < per_warp; ++k) {
    std::vector<double> at, cycles;
    for (size_t w = 0; w < m.gt.size(); ++w) {
      if (m.gt[w][k] == 0) continue;
      at.push_back(static_cast<double>(m.gt[w][k] - t0));
      int prev = k - 1;
      while (prev >= 0 && m.gt[w][prev] == 0) --prev;
      if (prev >= 0) cycles.push_back(static_cast<double>(m.clk[w][k] - m.clk[w][prev]));
    }
    if (at.empty()) continue;
    nlohmann::json r = {{"mark", names[k]},          {"warps", at.size()},
                        {"ns_min", quantile(at, 0)}, {"ns_p10", quantile(at, 0.1)},
                        {"ns_p50", quantile(at, 0.5)}, {"ns_p90", quantile(at, 0.9)},
                        {"ns_max", quantile(at, 1)}, {"step_cycles_p50", quantile(cycles, 0.5)},
                        {"step_cycles_p90", quantile(cycles, 0.9)}};
    if (print)
      std::printf("  %-15s %5zu warps  ns min %6.0f p10 %6.0f p50 %6.0f p90 %6.0f max %6.0f   step cycles p50 %6.0f p90 %6.0f\n",
                  names[k], at.size(), quantile(at, 0), quantile(at, 0.1), quantile(at, 0.5), quantile(at, 0.9),
                  quantile(at, 1), quantile(cycles, 0.5), quantile(cycles, 0.9));
    j.push_back(r);
  }
  // SM clock rate seen by the warps: cycles over ns from their first to last mark.
  std::vector<double> ghz;
  for (size_t w = 0; w < m.gt.size(); ++w) {
    int last = per_warp - 1;
    while (last > 0 && m.gt[w][last] == 0) --last;
    if (m.gt[w][last] > m.gt[w][0] + 500) ghz.push_back(static_cast<double>(m.clk[w][last] - m.clk[w][0]) / static_cast<double>(m.gt[w][last] - m.gt[w][0]));
  }
  if (print && !ghz.empty()) std::printf("  SM clock seen by the warps: %.2f GHz (median)\n", median(ghz));
  return {{"marks", j}, {"sm_ghz", median(ghz)}};
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = s.find(',', at);
    v.push_back(std::stoi(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<int> batches = {14, 16, 18};
  int calls = 40;
  std::string out = "wgmma-timeline.json", only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--batches" && i + 1 < argc) batches = parse_list(argv[++i]);
    else if (a == "--calls" && i + 1 < argc) calls = std::stoi(argv[++i]);
    else if (a == "--out" && i + 1 < argc) out = argv[++i];
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else throw std::runtime_error("unknown argument " + a + " (--batches 14,16 --calls N --out FILE)");
  }
  if (calls < 5) throw std::runtime_error("--calls must be at least 5");
  Probe probe;
  if (!only.empty()) {  // one kernel, `calls` runs per batch, host waiting: for ncu
    for (int lb : batches) {
      Setup s = make_setup(int64_t{1} << lb, probe.sms());
      auto nothing = [] {};
      auto none = [](int) {};
      std::vector<double> us;
      if (only == "production") us = probe.time_calls(3, calls, nothing, [&](int r) { probe.launch_net<false>(s, r, Shape{2, 2}); }, none);
      else if (only == "tma") us = probe.time_calls(3, calls, nothing, [&](int r) { probe.launch_tma<false>(s, r); }, none);
      else if (only == "copy") us = probe.time_calls(3, calls, nothing, [&](int r) { probe.launch_copy<false>(s, r); }, none);
      else throw std::runtime_error("--only takes production, tma or copy");
      std::printf("%s 2^%d: %.2f µs per call (event, median)\n", only.c_str(), lb, median(us));
      free_setup(s);
    }
    return 0;
  }
  std::printf("tinyfuse-wgmma-timeline on %s (%d SMs), %d calls per row, host waits for each\n", probe.name().c_str(),
              probe.sms(), calls);
  nlohmann::json result = {{"device", probe.name()}, {"calls", calls}, {"rows", nlohmann::json::array()}};
  const Shape production{2, 2};
  for (int lb : batches) {
    if (lb < 6 || lb > 24) throw std::runtime_error("--batches takes log2 sizes 6 .. 24");
    const int64_t batch = int64_t{1} << lb;
    Setup s = make_setup(batch, probe.sms());
    nlohmann::json row = {{"batch_log2", lb}};
    std::printf("\n== batch 2^%d\n", lb);
    auto none = [](int) {};
    auto nothing = [] {};
    // Unmarked first: the figures the marks must not move much.
    const auto net_us = probe.time_calls(10, calls, nothing, [&](int r) { probe.launch_net<false>(s, r, production); }, none);
    const auto copy_us = probe.time_calls(10, calls, nothing, [&](int r) { probe.launch_copy<false>(s, r); }, none);
    // Marked: keep the marks of the call with the median time.
    std::vector<CallMarks> net_marks, copy_marks;
    const size_t net_warps = static_cast<size_t>(probe.sms()) * production.blocks_per_sm * production.groups * 4;
    const auto marked_us = probe.time_calls(
        10, calls, [&] { probe.clear_marks(s, wg::kMarkCount); }, [&](int r) { probe.launch_net<true>(s, r, production); },
                                            [&](int) { net_marks.push_back(fetch_marks(s, net_warps, wg::kMarkCount)); });
    const size_t copy_warps = (static_cast<size_t>(batch) * kWidth * 2 / 16 + kCopyThreads - 1) / kCopyThreads * (kCopyThreads / 32);
    const auto copy_marked_us = probe.time_calls(
        10, calls, [&] { probe.clear_marks(s, 2); }, [&](int r) { probe.launch_copy<true>(s, r); },
                                                 [&](int) { copy_marks.push_back(fetch_marks(s, copy_warps, 2)); });
    auto median_index = [](const std::vector<double>& us) {
      std::vector<size_t> idx(us.size());
      for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
      std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return us[a] < us[b]; });
      return idx[idx.size() / 2];
    };
    std::printf("event µs per call (median of %d): network %.2f, marked %.2f; copy %.2f, marked %.2f\n", calls,
                median(net_us), median(marked_us), median(copy_us), median(copy_marked_us));
    std::printf("network marks (the median call, %.2f µs):\n", marked_us[median_index(marked_us)]);
    row["network_us"] = median(net_us);
    row["network_marked_us"] = median(marked_us);
    row["copy_us"] = median(copy_us);
    row["copy_marked_us"] = median(copy_marked_us);
    row["network_timeline"] = summarize(net_marks[median_index(marked_us)], wg::kMarkCount, kMarkNames, true);
    static const char* const kCopyNames[] = {"entry", "stored"};
    std::printf("copy marks (the median call, %.2f µs):\n", copy_marked_us[median_index(copy_marked_us)]);
    row["copy_timeline"] = summarize(copy_marks[median_index(copy_marked_us)], 2, kCopyNames, true);
    // Every call's spread, to see how steady the milestones are: p50 of 'staged' and of the last
    // mark per call.
    std::vector<double> staged, last;
    for (const auto& m : net_marks) {
      nlohmann::json t = summarize(m, wg::kMarkCount, kMarkNames, false);
      for (const auto& r : t["marks"]) {
        if (r["mark"] == "staged") staged.push_back(r["ns_p50"].get<double>());
        if (r["mark"] == "end") last.push_back(r["ns_max"].get<double>());
      }
    }
    {  // The TMA kernel against the production kernel, bit for bit, on the whole batch and on one
       // that ends inside a tile; outputs poisoned first, rows past the batch must stay poisoned.
      const size_t elems = static_cast<size_t>(batch) * kWidth;
      std::vector<uint16_t> want(elems), got(elems);
      for (int64_t rows : {batch, batch - 37}) {
        check(cudaMemset(s.output, 0xFF, elems * 2), "poison");
        probe.launch_net<false>(s, 0, production, rows);
        check(cudaDeviceSynchronize(), "production run");
        check(cudaMemcpy(want.data(), s.output, elems * 2, cudaMemcpyDeviceToHost), "copy");
        check(cudaMemset(s.output, 0xFF, elems * 2), "poison");
        probe.launch_tma<false>(s, 0, rows);
        check(cudaDeviceSynchronize(), "tma run");
        check(cudaMemcpy(got.data(), s.output, elems * 2, cudaMemcpyDeviceToHost), "copy");
        size_t differ = 0, poisoned_inside = 0, written_past = 0;
        for (size_t i = 0; i < elems; ++i) {
          const bool inside = static_cast<int64_t>(i / kWidth) < rows;
          if (inside && got[i] != want[i]) ++differ;
          if (inside && got[i] == 0xFFFF) ++poisoned_inside;
          if (!inside && got[i] != 0xFFFF) ++written_past;
        }
        std::printf("tma vs production, %lld rows: %zu of %lld elements differ, %zu unwritten, %zu written past the batch\n",
                    static_cast<long long>(rows), differ, static_cast<long long>(rows) * kWidth, poisoned_inside, written_past);
        row["tma_check"].push_back({{"rows", rows}, {"differ", differ}, {"unwritten", poisoned_inside}, {"written_past", written_past}});
      }
      // What encoding a tensor map costs the host.
      CUtensorMap map;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 1000; ++i) tf::cuda::fused::encode_row_tiles(&map, s.inputs[static_cast<size_t>(i % s.buffers)], batch, kWidth);
      const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / 1000;
      std::printf("encoding one tensor map: %.0f ns on the host\n", ns);
      row["encode_ns"] = ns;
    }
    {  // The TMA kernel's timeline.
      std::vector<CallMarks> tm;
      const size_t warps = static_cast<size_t>(probe.sms()) * 16;
      const auto us = probe.time_calls(
          10, calls, [&] { probe.clear_marks(s, wg::kMarkCount); }, [&](int r) { probe.launch_tma<true>(s, r); },
          [&](int) { tm.push_back(fetch_marks(s, warps, wg::kMarkCount)); });
      std::printf("TMA kernel, marks (the median call, %.2f µs):\n", us[median_index(us)]);
      row["tma_timeline"] = summarize(tm[median_index(us)], wg::kMarkCount, kMarkNames, true);
    }
    std::printf("over %d marked calls: 'staged' p50 %.0f – %.0f ns, last warp's end %.0f – %.0f ns\n", calls,
                quantile(staged, 0), quantile(staged, 1), quantile(last, 0), quantile(last, 1));
    // Launch shapes: warpgroups per block x resident blocks per SM.
    nlohmann::json shapes = nlohmann::json::array();
    std::printf("launch shapes (unmarked, event µs median):");
    for (Shape sh : {Shape{2, 2}, Shape{2, 1}, Shape{1, 4}, Shape{1, 3}, Shape{1, 2}}) {
      const auto us = probe.time_calls(5, calls, nothing, [&](int r) { probe.launch_net<false>(s, r, sh); }, none);
      std::printf("  %dx%d %.2f", sh.groups, sh.blocks_per_sm, median(us));
      shapes.push_back({{"groups", sh.groups}, {"blocks_per_sm", sh.blocks_per_sm}, {"us", median(us)}});
    }
    std::printf("\n");
    row["launch_shapes"] = shapes;
    result["rows"].push_back(row);
    free_setup(s);
  }
  const std::string tmp = out + ".tmp";
  {
    std::ofstream f(tmp);
    f << result.dump(1) << "\n";
    if (!f) throw std::runtime_error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), out.c_str()) != 0) throw std::runtime_error("cannot rename " + tmp + " to " + out);
  std::printf("\nwrote %s\n", out.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "tinyfuse-wgmma-timeline: %s\n", e.what());
  return 1;
}
