// FullyFusedMLP inference through the Hopper kernel (wgmma_kernel.cuh). CMake compiles this unit
// for sm_90a alone (wgmma exists on no other target; src/cuda/CMakeLists.txt) when the build's
// architectures include 90, and defines TINYFUSE_WGMMA_SM90A for it; otherwise it compiles to a
// launcher that always declines, and inference runs the mma.sync streaming kernel.
#include "cuda/fused/forward_choice.h"
#include "cuda/fused/stream_launch.h"

#if defined(TINYFUSE_WGMMA_SM90A)
#include <cstdlib>
#include <cstdint>

#include "cuda/fused/launch_config.h"
#include "cuda/fused/tensor_maps.h"
#include "cuda/fused/wgmma_kernel.cuh"
#include "cuda/fused/wgmma_tma_kernel.cuh"
#endif

namespace tinyfuse::cuda::fused {

#if defined(TINYFUSE_WGMMA_SM90A)

namespace {

// Warpgroups per block: 64 wide is memory-bound and does best with small blocks (2 per SM),
// 128 wide is compute-bound and does best with 3 warpgroups sharing one copy of the weights
// (the 2026-12-03 probe, benchmarks/results/wgmma-probe-h200-2026-12-03.json).
int preferred_groups(int width) {
  static const int forced = [] {
    const char* e = std::getenv("TINYFUSE_WGMMA_GROUPS");  // experiment knob (1 .. max_groups)
    return e ? std::atoi(e) : 0;
  }();
  if (forced >= 1 && forced <= wgmma::max_groups(width)) return forced;
  return width == 128 ? 3 : 2;
}

// Launches through the runtime call that returns the launch's own error: asking for it afterwards
// (cudaGetLastError, as <<<>>> needs) costs the host another 30 - 100 ns per call, the more when it
// has just waited for the GPU (tinyfuse-host-costs, 2026-12-04).
void launch(const void* kernel, int64_t blocks, int threads, size_t smem, cudaStream_t stream, void** params,
            const char* name) {
  const cudaError_t e = cudaLaunchKernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(static_cast<unsigned>(threads)),
                                         params, smem, stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // leave no error behind for the next call to find
    ::tinyfuse::gpu::throw_gpu_error(e, name, __FILE__, __LINE__);
  }
}

// Two input tiles in flight per warp: three or four measured no faster at 2^14 .. 2^22 (2026-12-04,
// docs/PERFORMANCE.md).
constexpr int kStages = 2;

template <typename T, int WIDTH, Epilogue HIDDEN, Epilogue OUT, bool SQUARE>
bool launch_kernel(const DeviceLimits& dev, const FusedShape& shape, const ForwardArgs& args, gpuStream_t stream) {
  KernelShape ks = kernel_shape(shape, true);
  wgmma::Plan p = wgmma::make_plan(WIDTH, shape, args, static_cast<int>(sizeof(T)));
  const auto kernel = wgmma::inference_kernel<T, WIDTH, kStages, HIDDEN, OUT, SQUARE>;
  for (int groups = preferred_groups(WIDTH); groups >= 1; --groups) {
    const size_t smem = wgmma::launch_smem_bytes(p, groups, kStages);
    const int threads = groups * wgmma::kGroupThreads;
    const int64_t blocks = persistent_grid_blocks(dev, reinterpret_cast<const void*>(kernel), threads, smem, p.n_tiles, groups);
    if (blocks < 1) continue;
    void* params[] = {&ks, const_cast<ForwardArgs*>(&args), &p};  // read, never written
    launch(reinterpret_cast<const void*>(kernel), blocks, threads, smem, stream, params, "wgmma::inference_kernel");
    return true;
  }
  return false;  // too deep for shared memory: the streaming kernel decides next
}

// The TMA kernel (wgmma_tma_kernel.cuh) moves whole 64-row tiles by tensor copies; it needs rows
// the copy engine can describe (encode_row_tiles: 16-byte aligned rows and strides). Measured
// against the row-copying kernel on an H200 (docs/PERFORMANCE.md, 2026-12-04 eighth session):
// 4.50 -> 4.42, 8.37 -> 7.23, 21.7 -> 20.1, 77.8 -> 70.6 and 293 -> 273 µs at 2^14 .. 2^22 rows.
// tma_inference() (forward_choice.h) switches it off for comparisons.
template <typename T>
bool launch_tma_kernel(const DeviceLimits& dev, const FusedShape& shape, const ForwardArgs& args, gpuStream_t stream) {
  if (!tma_inference()) return false;
  CUtensorMap in_map, out_map;
  if (!row_tiles(&in_map, args.input, args.batch, args.ld_in) || !row_tiles(&out_map, args.output, args.batch, args.ld_out))
    return false;
  KernelShape ks = kernel_shape(shape, true);
  wgmma::TmaPlan p;
  p.weights_bytes = wgmma::all_layers_bytes(wgmma::kTmaWidth, ks);
  p.n_tiles = (args.batch + wgmma::kGroupRows - 1) / wgmma::kGroupRows;
  const size_t smem = wgmma::tma_smem_bytes(p.weights_bytes, wgmma::kTmaGroups);
  const auto kernel = wgmma::tma_inference_kernel<T, Epilogue::Relu, Epilogue::Identity>;
  const int threads = wgmma::kTmaGroups * wgmma::kGroupThreads;
  const int64_t blocks = persistent_grid_blocks(dev, reinterpret_cast<const void*>(kernel), threads, smem, p.n_tiles, wgmma::kTmaGroups);
  if (blocks < 1) return false;  // too deep for shared memory
  const uint16_t* weights = static_cast<const uint16_t*>(args.weights);
  void* params[] = {&in_map, &out_map, &ks, &weights, &p};
  launch(reinterpret_cast<const void*>(kernel), blocks, threads, smem, stream, params, "wgmma::tma_inference_kernel");
  count_tma_inference_launch();
  return true;
}

// The square ReLU network (input, hidden and output all WIDTH wide, no output activation: the
// benchmark's and the usual production shape) has its own kernels with those widths built in:
// at 64 wide the TMA kernel where the rows allow, else the row-copying square instance.
template <typename T, int WIDTH, Epilogue HIDDEN, Epilogue OUT>
bool launch_variant(const DeviceLimits& dev, const FusedShape& shape, const ForwardArgs& args, gpuStream_t stream) {
  if constexpr (HIDDEN == Epilogue::Relu && OUT == Epilogue::Identity) {
    const bool aligned = (reinterpret_cast<uintptr_t>(args.weights) & 15) == 0;
    if (shape.in_width == WIDTH && shape.out_width == WIDTH && aligned) {
      if constexpr (WIDTH == wgmma::kTmaWidth)
        if (launch_tma_kernel<T>(dev, shape, args, stream)) return true;
      return launch_kernel<T, WIDTH, HIDDEN, OUT, true>(dev, shape, args, stream);
    }
  }
  return launch_kernel<T, WIDTH, HIDDEN, OUT, false>(dev, shape, args, stream);
}

template <typename T, int WIDTH>
bool launch_width(const DeviceLimits& dev, const FusedShape& shape, const ForwardArgs& args, gpuStream_t stream) {
  const bool relu = shape.act == Activation::ReLU, identity_out = shape.out_act == Activation::None;
  if (relu && identity_out) return launch_variant<T, WIDTH, Epilogue::Relu, Epilogue::Identity>(dev, shape, args, stream);
  if (relu) return launch_variant<T, WIDTH, Epilogue::Relu, Epilogue::Generic>(dev, shape, args, stream);
  if (identity_out) return launch_variant<T, WIDTH, Epilogue::Generic, Epilogue::Identity>(dev, shape, args, stream);
  return launch_variant<T, WIDTH, Epilogue::Generic, Epilogue::Generic>(dev, shape, args, stream);
}

template <typename T>
bool launch_typed(const DeviceLimits& dev, const FusedShape& shape, const ForwardArgs& args, gpuStream_t stream) {
  if (shape.width == 64) return launch_width<T, 64>(dev, shape, args, stream);
  if (shape.width == 128) return launch_width<T, 128>(dev, shape, args, stream);
  return false;  // 16 and 32 wide: not measured against the mma.sync kernel, which keeps them
}

}  // namespace

bool launch_wgmma_inference(DType t, const FusedShape& shape, const ForwardArgs& args, gpuStream_t stream) {
  if (!args.output || args.hidden_y || args.hidden_z || args.out_z || args.batch <= 0) return false;
  if (shape.in_width > kStreamMaxIoWidth || shape.out_width > kStreamMaxIoWidth) return false;
  if (shape.in_width % 8 != 0 || shape.out_width % 8 != 0) return false;  // whole 16-byte chunks per row
  // The kernel offsets within a warp's 16 rows in 32 bits (wgmma::Plan).
  constexpr int64_t kMaxLd = int64_t{1} << 26;
  if (args.ld_in <= 0 || args.ld_in >= kMaxLd || args.ld_out <= 0 || args.ld_out >= kMaxLd) return false;
  const DeviceLimits& dev = device_limits();
  if (dev.major != 9 || dev.minor != 0) return false;  // sm_90a code runs on compute capability 9.0 only
  if (t == DType::F16) return launch_typed<__half>(dev, shape, args, stream);
  if (t == DType::BF16) return launch_typed<__nv_bfloat16>(dev, shape, args, stream);
  return false;
}

bool wgmma_inference_built() { return true; }

#else

bool launch_wgmma_inference(DType, const FusedShape&, const ForwardArgs&, gpuStream_t) { return false; }
bool wgmma_inference_built() { return false; }

#endif

}  // namespace tinyfuse::cuda::fused
